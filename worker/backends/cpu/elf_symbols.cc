#include "worker/backends/cpu/elf_symbols.h"

#include <elf.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kevo::worker {
namespace {

// Copies a T out of `bytes` at `offset` (unaligned-safe); false when it does
// not fit.
template <typename T>
bool ReadAt(std::string_view bytes, uint64_t offset, T* out) {
  if (offset > bytes.size() || bytes.size() - offset < sizeof(T)) return false;
  std::memcpy(out, bytes.data() + offset, sizeof(T));
  return true;
}

}  // namespace

absl::StatusOr<std::vector<ElfSymbol>> ParseElfSymbols(std::string_view bytes) {
  Elf64_Ehdr eh;
  if (!ReadAt(bytes, 0, &eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) {
    return absl::InvalidArgumentError("not an ELF file");
  }
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB) {
    return absl::InvalidArgumentError("only little-endian ELF64 is supported");
  }
  if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0) {
    return absl::InvalidArgumentError("ELF file has no usable section headers");
  }
  std::vector<Elf64_Shdr> sections(eh.e_shnum);
  for (size_t i = 0; i < sections.size(); ++i) {
    if (!ReadAt(bytes, eh.e_shoff + i * sizeof(Elf64_Shdr), &sections[i])) {
      return absl::InvalidArgumentError("ELF section header out of bounds");
    }
  }
  const Elf64_Shdr* table = nullptr;
  for (const auto& s : sections) {
    if (s.sh_type == SHT_DYNSYM) table = &s;
  }
  if (table == nullptr) {
    for (const auto& s : sections) {
      if (s.sh_type == SHT_SYMTAB) table = &s;
    }
  }
  if (table == nullptr) return absl::NotFoundError("ELF file has no symbol table");
  if (table->sh_entsize != sizeof(Elf64_Sym) || table->sh_link >= sections.size()) {
    return absl::InvalidArgumentError("malformed ELF symbol table");
  }
  const Elf64_Shdr& strtab = sections[table->sh_link];
  if (strtab.sh_offset > bytes.size() || bytes.size() - strtab.sh_offset < strtab.sh_size ||
      table->sh_offset > bytes.size() || bytes.size() - table->sh_offset < table->sh_size) {
    return absl::InvalidArgumentError("ELF symbol or string table out of bounds");
  }
  std::string_view strings = bytes.substr(strtab.sh_offset, strtab.sh_size);
  std::vector<ElfSymbol> symbols;
  const uint64_t count = table->sh_size / sizeof(Elf64_Sym);
  for (uint64_t i = 1; i < count; ++i) {  // entry 0 is the null symbol
    Elf64_Sym sym;
    if (!ReadAt(bytes, table->sh_offset + i * sizeof(Elf64_Sym), &sym)) {
      return absl::InvalidArgumentError("ELF symbol out of bounds");
    }
    if (sym.st_name >= strings.size()) return absl::InvalidArgumentError("ELF symbol name out of bounds");
    std::string_view rest = strings.substr(sym.st_name);
    size_t end = rest.find('\0');
    if (end == std::string_view::npos) return absl::InvalidArgumentError("unterminated ELF symbol name");
    if (end == 0) continue;
    ElfSymbol out;
    out.name = std::string(rest.substr(0, end));
    out.undefined = sym.st_shndx == SHN_UNDEF;
    const unsigned bind = ELF64_ST_BIND(sym.st_info);
    const unsigned type = ELF64_ST_TYPE(sym.st_info);
    out.weak = bind == STB_WEAK;
    out.global = bind == STB_GLOBAL || bind == STB_WEAK || bind == STB_GNU_UNIQUE;
    out.function = type == STT_FUNC || type == STT_GNU_IFUNC;
    symbols.push_back(std::move(out));
  }
  return symbols;
}

absl::StatusOr<std::vector<ElfSymbol>> ReadElfSymbols(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::ostringstream data;
  data << in.rdbuf();
  std::string bytes = data.str();
  auto symbols = ParseElfSymbols(bytes);
  if (!symbols.ok()) {
    return absl::Status(symbols.status().code(), absl::StrCat(path, ": ", symbols.status().message()));
  }
  return symbols;
}

std::vector<std::string> UndefinedSymbolNames(const std::vector<ElfSymbol>& symbols) {
  std::vector<std::string> names;
  for (const ElfSymbol& s : symbols) {
    if (s.undefined) names.push_back(s.name);
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

}  // namespace kevo::worker
