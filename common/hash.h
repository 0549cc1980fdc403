// Content hashing: SHA-256 as lowercase hex. Thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace kevo {

std::string Sha256Hex(std::string_view data);

}  // namespace kevo
