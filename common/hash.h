// Content hashing: SHA-256 as lowercase hex. Thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace kevo {

std::string Sha256Hex(std::string_view data);

}  // namespace kevo

namespace google::protobuf {
class Message;
}

namespace kevo {

// The message's bytes with deterministic serialization (map entries sorted),
// so equal messages hash equally.
std::string DeterministicBytes(const google::protobuf::Message& message);

}  // namespace kevo
