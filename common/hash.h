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
namespace v1 {
class Candidate;
}

// The message's bytes with deterministic serialization (map entries sorted),
// so equal messages hash equally.
std::string DeterministicBytes(const google::protobuf::Message& message);

// A candidate's one hash: Sha256Hex(DeterministicBytes(candidate)). The
// coordinator stores the candidate under it (EvalRecord.candidate_hash), a
// job's tree tells its nodes apart by it, and a worker's Evaluation carries it.
std::string CandidateHash(const v1::Candidate& candidate);

}  // namespace kevo
