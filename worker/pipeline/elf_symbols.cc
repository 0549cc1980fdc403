#include "worker/pipeline/elf_symbols.h"

#include <elf.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <optional>
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

// The section headers of a little-endian ELF64 image, and its header.
absl::StatusOr<std::vector<Elf64_Shdr>> SectionHeaders(std::string_view bytes, Elf64_Ehdr* header) {
  Elf64_Ehdr& eh = *header;
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
  return sections;
}

// The bytes of `s` within `bytes`, or nullopt when they lie outside it.
std::optional<std::string_view> SectionBytes(std::string_view bytes, const Elf64_Shdr& s) {
  if (s.sh_type == SHT_NOBITS) return std::string_view();
  if (s.sh_offset > bytes.size() || bytes.size() - s.sh_offset < s.sh_size) return std::nullopt;
  return bytes.substr(s.sh_offset, s.sh_size);
}

}  // namespace

absl::StatusOr<std::string_view> ElfSection(std::string_view bytes, std::string_view name) {
  Elf64_Ehdr eh;
  auto sections = SectionHeaders(bytes, &eh);
  if (!sections.ok()) return sections.status();
  if (eh.e_shstrndx >= sections->size()) return absl::InvalidArgumentError("ELF file has no section names");
  auto names = SectionBytes(bytes, (*sections)[eh.e_shstrndx]);
  if (!names) return absl::InvalidArgumentError("ELF section names out of bounds");
  for (const Elf64_Shdr& s : *sections) {
    if (s.sh_name >= names->size()) continue;
    std::string_view rest = names->substr(s.sh_name);
    if (rest.substr(0, rest.find('\0')) != name) continue;
    auto data = SectionBytes(bytes, s);
    if (!data) return absl::InvalidArgumentError(absl::StrCat("ELF section ", std::string(name), " out of bounds"));
    return *data;
  }
  return absl::NotFoundError(absl::StrCat("ELF file has no section ", std::string(name)));
}

absl::StatusOr<std::vector<ElfNote>> ParseElfNotes(std::string_view bytes) {
  Elf64_Ehdr eh;
  auto sections = SectionHeaders(bytes, &eh);
  if (!sections.ok()) return sections.status();
  std::vector<ElfNote> notes;
  for (const Elf64_Shdr& s : *sections) {
    if (s.sh_type != SHT_NOTE) continue;
    auto data = SectionBytes(bytes, s);
    if (!data) return absl::InvalidArgumentError("ELF note section out of bounds");
    uint64_t at = 0;
    auto align4 = [](uint64_t n) { return (n + 3) & ~uint64_t{3}; };
    while (at + sizeof(Elf64_Nhdr) <= data->size()) {
      Elf64_Nhdr nh;
      ReadAt(*data, at, &nh);
      at += sizeof(Elf64_Nhdr);
      const uint64_t name_at = at, desc_at = at + align4(nh.n_namesz);
      if (desc_at > data->size() || data->size() - desc_at < nh.n_descsz) {
        return absl::InvalidArgumentError("ELF note out of bounds");
      }
      ElfNote note;
      note.name = std::string(data->substr(name_at, nh.n_namesz));
      while (!note.name.empty() && note.name.back() == '\0') note.name.pop_back();
      note.type = nh.n_type;
      note.desc = std::string(data->substr(desc_at, nh.n_descsz));
      notes.push_back(std::move(note));
      at = desc_at + align4(nh.n_descsz);
    }
  }
  return notes;
}

absl::StatusOr<std::vector<ElfSymbol>> ParseElfSymbols(std::string_view bytes) {
  Elf64_Ehdr eh;
  auto parsed = SectionHeaders(bytes, &eh);
  if (!parsed.ok()) return parsed.status();
  const std::vector<Elf64_Shdr>& sections = *parsed;
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

absl::StatusOr<bool> DefinesGlobalSymbol(const std::string& path, std::string_view name) {
  auto symbols = ReadElfSymbols(path);
  if (!symbols.ok()) return symbols.status();
  for (const ElfSymbol& s : *symbols) {
    if (s.name == name && !s.undefined && s.global) return true;
  }
  return false;
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
