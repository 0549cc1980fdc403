// Fuzz target: a native task's text (task.textproto), as `kevo` reads it from
// disk and the coordinator checks it when it arrives: parse, defaults,
// validation under the default size limits. Any input must end in a Status,
// never a crash, an overflow or a hang.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/task/kernelbench.h"
#include "common/task/task_loader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  google::protobuf::TextFormat::ParseInfoTree tree;
  auto task = kevo::task::ParseTaskText(text, "fuzz/task.textproto", &tree);
  if (!task.ok()) return 0;
  kevo::task::ApplyTaskDefaults(&*task);
  (void)kevo::task::ValidateTask(*task, {.path = "fuzz/task.textproto", .tree = &tree});
  (void)kevo::task::ValidateReceivedTask(*task);
  return 0;
}
