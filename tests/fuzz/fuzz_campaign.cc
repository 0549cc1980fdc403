// Fuzz target: a campaign as a client submits it (SubmitCampaignRequest in
// text format: the spec and its tasks, inline), checked as the coordinator
// checks it before anything is stored: ValidateCampaign, which validates
// every task too.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "google/protobuf/text_format.h"

#include "coordinator/campaigns/campaigns.h"
#include "kevo/v1/campaign.pb.h"
#include "tests/fuzz/quiet_errors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kevo::v1::SubmitCampaignRequest request;
  google::protobuf::TextFormat::Parser parser;
  parser.AllowPartialMessage(true);
  static kevo::fuzz::QuietErrors quiet;
  parser.RecordErrorsTo(&quiet);
  if (!parser.ParseFromString(std::string(reinterpret_cast<const char*>(data), size), &request)) return 0;
  const std::vector<kevo::v1::CampaignTask> tasks(request.tasks().begin(), request.tasks().end());
  (void)kevo::campaigns::ValidateCampaign(request.spec(), tasks);
  return 0;
}
