#include "worker/runner/seccomp_policy.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"

#include "worker/runner/protocol.h"

namespace kevo::runner {
namespace {

int g_sigsys_report_fd = -1;

// Async-signal-safe: formats "sigsys <nr>\n" by hand and exits.
void OnSigsys(int, siginfo_t* info, void*) {
  char line[48] = "sigsys ";
  int pos = 7;
  int nr = info->si_syscall;
  char digits[16];
  int n = 0;
  if (nr < 0) {
    line[pos++] = '-';
    nr = -nr;
  }
  do {
    digits[n++] = static_cast<char>('0' + nr % 10);
    nr /= 10;
  } while (nr > 0 && n < 15);
  while (n > 0) line[pos++] = digits[--n];
  line[pos++] = '\n';
  if (g_sigsys_report_fd >= 0) (void)!write(g_sigsys_report_fd, line, pos);
  _exit(kExitSandboxViolation);
}

}  // namespace

absl::Status InstallSigsysHandler(int report_fd) {
  g_sigsys_report_fd = report_fd;
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = OnSigsys;
  sa.sa_flags = SA_SIGINFO;
  sigfillset(&sa.sa_mask);  // nothing interrupts the report
  if (sigaction(SIGSYS, &sa, nullptr) != 0) {
    return absl::InternalError(absl::StrCat("sigaction(SIGSYS): ", strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status InstallRunnerFilter() {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_TRAP);
  if (ctx == nullptr) return absl::InternalError("seccomp_init failed");
  int rc = 0;
  std::string failed;
  auto add = [&](int nr, uint32_t action, std::initializer_list<scmp_arg_cmp> args = {}) {
    int r = seccomp_rule_add_array(ctx, action, nr, static_cast<unsigned>(args.size()),
                                   args.size() ? args.begin() : nullptr);
    if (r != 0 && rc == 0) {
      rc = r;
      char* name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
      failed = name ? name : std::to_string(nr);
      free(name);
    }
  };
  const uint32_t allow = SCMP_ACT_ALLOW;
  // File access on descriptors that are already open (the runner's own
  // result files, stdout/stderr, the .so files dlopen maps).
  for (int nr : {SCMP_SYS(read), SCMP_SYS(write), SCMP_SYS(readv), SCMP_SYS(writev), SCMP_SYS(pread64), SCMP_SYS(close),
                 SCMP_SYS(fstat), SCMP_SYS(newfstatat), SCMP_SYS(statx), SCMP_SYS(lseek)}) {
    add(nr, allow);
  }
  // dlopen opens the .so and its dependencies: read-only, never creating,
  // truncating or appending (masked compare on the flags argument).
  add(SCMP_SYS(openat), allow,
      {SCMP_A2(SCMP_CMP_MASKED_EQ, O_ACCMODE | O_CREAT | O_TRUNC | O_APPEND | __O_TMPFILE, 0)});
  // Memory.
  for (int nr :
       {SCMP_SYS(mmap), SCMP_SYS(munmap), SCMP_SYS(mprotect), SCMP_SYS(madvise), SCMP_SYS(brk), SCMP_SYS(mremap)}) {
    add(nr, allow);
  }
  // Threads (OpenMP): clone only for threads; glibc tries clone3 first and
  // falls back to clone on ENOSYS (clone3's flags live in memory, out of
  // seccomp's reach, so it cannot be filtered by argument).
  add(SCMP_SYS(clone), allow, {SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD)});
  add(SCMP_SYS(clone3), SCMP_ACT_ERRNO(ENOSYS));
  for (int nr : {SCMP_SYS(futex), SCMP_SYS(set_robust_list), SCMP_SYS(rseq), SCMP_SYS(exit), SCMP_SYS(exit_group),
                 SCMP_SYS(rt_sigprocmask), SCMP_SYS(rt_sigreturn), SCMP_SYS(sched_yield), SCMP_SYS(sched_getaffinity),
                 SCMP_SYS(sched_setaffinity), SCMP_SYS(getpid), SCMP_SYS(gettid), SCMP_SYS(getcpu)}) {
    add(nr, allow);
  }
  // abort() raises SIGABRT through tgkill: only to this process.
  add(SCMP_SYS(tgkill), allow, {SCMP_A0(SCMP_CMP_EQ, static_cast<scmp_datum_t>(getpid()))});
  // Time and system information.
  for (int nr :
       {SCMP_SYS(clock_gettime), SCMP_SYS(clock_getres), SCMP_SYS(gettimeofday), SCMP_SYS(nanosleep),
        SCMP_SYS(clock_nanosleep), SCMP_SYS(sysinfo), SCMP_SYS(uname), SCMP_SYS(getrandom), SCMP_SYS(getrlimit)}) {
    add(nr, allow);
  }
  // Reading a limit is fine, setting one is not.
  add(SCMP_SYS(prlimit64), allow, {SCMP_A2(SCMP_CMP_EQ, 0)});
  // stdio asks whether a stream is a terminal; answer "no" instead of trapping.
  add(SCMP_SYS(ioctl), SCMP_ACT_ERRNO(ENOTTY));
  // Needed to stack the post-load filter; a filter can only narrow the policy.
  add(SCMP_SYS(seccomp), allow);
  if (rc != 0) {
    seccomp_release(ctx);
    return absl::InternalError(absl::StrCat("seccomp rule for ", failed, ": ", strerror(-rc)));
  }
  rc = seccomp_load(ctx);
  seccomp_release(ctx);
  if (rc != 0) return absl::InternalError(absl::StrCat("seccomp_load: ", strerror(-rc)));
  return absl::OkStatus();
}

absl::Status InstallDenylistFilter() {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (ctx == nullptr) return absl::InternalError("seccomp_init failed");
  int rc = 0;
  std::string failed;
  auto add = [&](int nr, uint32_t action, std::initializer_list<scmp_arg_cmp> args = {}) {
    int r = seccomp_rule_add_array(ctx, action, nr, static_cast<unsigned>(args.size()),
                                   args.size() ? args.begin() : nullptr);
    if (r != 0 && rc == 0) {
      rc = r;
      char* name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
      failed = name ? name : std::to_string(nr);
      free(name);
    }
  };
  const uint32_t trap = SCMP_ACT_TRAP;
  for (int nr : {SCMP_SYS(execve),
                 SCMP_SYS(execveat),
                 SCMP_SYS(fork),
                 SCMP_SYS(vfork),
                 SCMP_SYS(socket),
                 SCMP_SYS(socketpair),
                 SCMP_SYS(connect),
                 SCMP_SYS(bind),
                 SCMP_SYS(listen),
                 SCMP_SYS(accept),
                 SCMP_SYS(accept4),
                 SCMP_SYS(ptrace),
                 SCMP_SYS(process_vm_readv),
                 SCMP_SYS(process_vm_writev),
                 SCMP_SYS(kill),
                 SCMP_SYS(setrlimit),
                 SCMP_SYS(setuid),
                 SCMP_SYS(setgid),
                 SCMP_SYS(setns),
                 SCMP_SYS(unshare),
                 SCMP_SYS(mount),
                 SCMP_SYS(init_module),
                 SCMP_SYS(finit_module)}) {
    add(nr, trap);
  }
  // New processes, but not new threads.
  add(SCMP_SYS(clone), trap, {SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0)});
  add(SCMP_SYS(clone3), SCMP_ACT_ERRNO(ENOSYS));
  // Raising limits is refused; reading them is fine.
  add(SCMP_SYS(prlimit64), trap, {SCMP_A2(SCMP_CMP_NE, 0)});
  if (rc != 0) {
    seccomp_release(ctx);
    return absl::InternalError(absl::StrCat("seccomp rule for ", failed, ": ", strerror(-rc)));
  }
  rc = seccomp_load(ctx);
  seccomp_release(ctx);
  if (rc != 0) return absl::InternalError(absl::StrCat("seccomp_load: ", strerror(-rc)));
  return absl::OkStatus();
}

absl::Status InstallPostLoadFilter() {
#if !defined(__x86_64__)
  return absl::UnimplementedError("the post-load seccomp filter is written for x86-64 only");
#else
  // Hand-written BPF: libseccomp's loader makes system calls the main filter
  // does not allow (prctl), and this program is tiny.
  struct sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_openat, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EACCES),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_seccomp, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {static_cast<unsigned short>(sizeof(filter) / sizeof(filter[0])), filter};
  if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) {
    return absl::InternalError(absl::StrCat("seccomp(post-load): ", strerror(errno)));
  }
  return absl::OkStatus();
#endif
}

}  // namespace kevo::runner
