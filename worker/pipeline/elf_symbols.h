// A minimal, bounds-checked ELF64 reader, used to list what a compiled
// candidate imports before any of its code runs. It reads the dynamic symbol
// table (.dynsym) of a shared object, or the static one (.symtab) of a
// relocatable object (.o) that has no .dynsym; and sections and notes by name
// (the amd backend reads the HIP fat binary and the AMDGPU metadata note).
//
// Thread-safe (pure functions over the file's bytes).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace kevo::worker {

struct ElfSymbol {
  std::string name;
  bool undefined = false;  // st_shndx == SHN_UNDEF: imported from elsewhere
  bool weak = false;       // STB_WEAK
  bool global = false;     // STB_GLOBAL or STB_WEAK (visible outside the object)
  bool function = false;   // STT_FUNC (or STT_GNU_IFUNC)
};

// Symbols of the ELF image `bytes` (empty names skipped). Returns
// InvalidArgument when it is not a little-endian ELF64 file or a table or
// string lies outside the image, NotFound when it has no symbol table.
absl::StatusOr<std::vector<ElfSymbol>> ParseElfSymbols(std::string_view bytes);

// Reads `path` and parses it. Returns NotFound/PermissionDenied when the file
// cannot be read, else as ParseElfSymbols.
absl::StatusOr<std::vector<ElfSymbol>> ReadElfSymbols(const std::string& path);

// The contents of the section called `name` (a view into `bytes`). Returns
// NotFound when there is none, InvalidArgument for a malformed image.
absl::StatusOr<std::string_view> ElfSection(std::string_view bytes, std::string_view name);

// One note of an SHT_NOTE section: owner name (without the NUL), type and
// descriptor bytes.
struct ElfNote {
  std::string name;
  uint32_t type = 0;
  std::string desc;
};
// Every note of every SHT_NOTE section. InvalidArgument for a malformed image.
absl::StatusOr<std::vector<ElfNote>> ParseElfNotes(std::string_view bytes);

// Whether the ELF file at `path` defines the global symbol `name`. Returns
// ReadElfSymbols' errors.
absl::StatusOr<bool> DefinesGlobalSymbol(const std::string& path, std::string_view name);

// Names of the undefined (imported) symbols, sorted and unique.
std::vector<std::string> UndefinedSymbolNames(const std::vector<ElfSymbol>& symbols);

}  // namespace kevo::worker
