// The campaign report: one self-contained HTML page about a campaign that a
// platform owner can share — per-operator speedups on each platform (vs
// production first), each job's search trajectory, the models' throughput
// gains, failures by status, and a table of every entry. The page needs no
// network: it inlines d3 v3 (Debian's libjs-d3), the data as one JSON object
// and kevo's drawing script, which builds the charts as inline SVG.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "kevo/v1/campaign.pb.h"
#include "kevo/v1/job.pb.h"

namespace kevo::cli {

// Where Debian's libjs-d3 puts d3 v3.
inline constexpr char kDefaultD3Path[] = "/usr/share/javascript/d3/d3.min.js";

struct CampaignReportData {
  v1::Campaign campaign;                               // from CampaignService.GetCampaign
  std::map<std::string, v1::Job> jobs;                 // by job id, for each entry's job_id
  std::map<std::string, std::vector<v1::Node>> nodes;  // by job id, in creation order (Node.sequence)
};

// The page for `data`, with the d3 library read from `d3_path` (empty:
// kDefaultD3Path). A job missing from `jobs` or `nodes` is reported as such
// (no failures counted, no trajectory), not an error. NotFound when d3 cannot
// be read (the message says to install libjs-d3); FailedPrecondition when the
// file is not d3 v3, or holds text that would end its <script> early.
// Thread-safe (no shared state).
absl::StatusOr<std::string> RenderCampaignReport(const CampaignReportData& data, const std::string& d3_path = "");

}  // namespace kevo::cli
