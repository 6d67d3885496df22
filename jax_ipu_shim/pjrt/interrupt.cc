// Ctrl-C. Python's SIGINT handler only sets a flag that the interpreter reads between bytecodes: a main thread
// blocked in jaxlib (waiting for a result) or in one of our waits would never get to it, and neither would a run
// waiting on an infeed, a host callback or another process. So when the ipu backend starts (and Python's own
// handler is the one installed: see jax_ipu/backend/interrupts.py), JaxIpu_WatchInterrupts puts a handler in front of
// Python's that counts the interrupt and then calls it. Every run compares the count with its value at launch
// before each step, every wait of ours looks at it at least every kInterruptPoll, and a changed count fails the run
// (Cancelled), naming the program and what it was waiting for. Its outputs carry that error, the IPU is free for the
// next program, and jax_ipu turns the error into the KeyboardInterrupt that Python has pending.
//
// A SIGINT handler the user installs (signal.signal) replaces ours with Python's, and then Ctrl-C is theirs alone:
// nothing is cancelled.
#include <signal.h>

#include <cstring>

#include "jax_ipu/c_api.h"
#include "plugin.h"

namespace jax_ipu {
namespace {

std::atomic<uint64_t> g_interrupts{0};
struct sigaction g_previous;  // Python's handler, called after ours

void OnInterrupt(int sig, siginfo_t* info, void* context) {
  g_interrupts.fetch_add(1, std::memory_order_relaxed);  // lock-free: safe in a signal handler
  if (g_previous.sa_flags & SA_SIGINFO) {
    if (g_previous.sa_sigaction != nullptr) g_previous.sa_sigaction(sig, info, context);
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(sig);
  }
}

bool IsOurs(const struct sigaction& action) {
  return (action.sa_flags & SA_SIGINFO) && action.sa_sigaction == OnInterrupt;
}

thread_local bool t_in_run = false;
thread_local uint64_t t_run_seen = 0;

}  // namespace

const std::atomic<uint64_t>& Interrupts() { return g_interrupts; }

uint64_t InterruptsSeenByThisThread() { return t_in_run ? t_run_seen : g_interrupts.load(std::memory_order_relaxed); }

RunInterrupts::RunInterrupts(uint64_t seen) : saved_(t_run_seen), had_(t_in_run) {
  t_in_run = true;
  t_run_seen = seen;
}

RunInterrupts::~RunInterrupts() {
  t_in_run = had_;
  t_run_seen = saved_;
}

void ThrowIfInterrupted(uint64_t seen, const std::string& what) {
  if (g_interrupts.load(std::memory_order_relaxed) != seen) {
    throw ipu::Error(ipu::ErrorCode::Cancelled, what + " was interrupted (SIGINT, Ctrl-C)");
  }
}

}  // namespace jax_ipu


// Chains our SIGINT handler in front of the one installed now (Python's). 0: watching (or already), 1: there is no
// handler to chain to (SIG_DFL ends the process, SIG_IGN ignores Ctrl-C): nothing to do.
int JaxIpu_WatchInterrupts(void) {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  struct sigaction current;
  std::memset(&current, 0, sizeof current);
  if (::sigaction(SIGINT, nullptr, &current) != 0) return 1;
  if (jax_ipu::IsOurs(current)) return 0;
  const bool handler = (current.sa_flags & SA_SIGINFO) ? current.sa_sigaction != nullptr
                                                       : current.sa_handler != SIG_DFL && current.sa_handler != SIG_IGN;
  if (!handler) return 1;
  jax_ipu::g_previous = current;
  struct sigaction mine = current;
  mine.sa_flags |= SA_SIGINFO;
  mine.sa_sigaction = jax_ipu::OnInterrupt;
  return ::sigaction(SIGINT, &mine, nullptr) == 0 ? 0 : 1;
}

// 1 once per Ctrl-C (or run of them) not reported yet, and marks it reported; else 0. jax_ipu raises one
// KeyboardInterrupt per Ctrl-C with it: the mark is made here, before Python's own pending handler can run.
int JaxIpu_TakeInterrupt(void) {
  static std::atomic<uint64_t> taken{0};
  const uint64_t now = jax_ipu::Interrupts().load(std::memory_order_relaxed);
  return taken.exchange(now) != now ? 1 : 0;
}
