// WorkQueue: one IPU's work (runs, transfers) in the order it was queued, on the device's own worker thread.
#include <pthread.h>

#include <chrono>
#include <cstdio>

#include "plugin.h"

namespace jax_ipu {

// How long an idle worker looks for new work before it sleeps.
constexpr std::chrono::microseconds kSpin(50);

namespace {
thread_local const WorkQueue* t_serving = nullptr;
}  // namespace

const WorkQueue* ServingQueue() { return t_serving; }
Serving::Serving(const WorkQueue* queue) : saved_(t_serving) { t_serving = queue; }
Serving::~Serving() { t_serving = saved_; }

void WorkQueue::Start() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopping_) {
    throw ipu::Error(ipu::ErrorCode::Internal, name_ + ": the ipu client is being destroyed; no new work is taken");
  }
  if (!thread_.joinable()) thread_ = std::thread([self = shared_from_this()] { self->Loop(); });
}

void WorkQueue::Enqueue(std::function<void()> item) {
  Start();
  bool sleeping;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    items_.push_back(std::move(item));
    ++enqueued_;
    pending_.fetch_add(1, std::memory_order_release);
    queued_.store(items_.size(), std::memory_order_release);
    sleeping = sleeping_;
  }
  if (sleeping) cv_.notify_one();  // a spinning worker sees the item without a wake-up call
}

void WorkQueue::Drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  // A host callback running for this worker cannot wait for its own queue.
  if (t_serving == this) return;
  const uint64_t target = enqueued_;
  idle_cv_.wait(lock, [&] { return finished_ >= target; });
}

void WorkQueue::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (!thread_.joinable()) return;
  if (std::this_thread::get_id() == thread_.get_id() || t_serving == this) {
    thread_.detach();  // destroyed from its own work (a callback): it exits once the queue is empty
  } else {
    thread_.join();
  }
}

void WorkQueue::Loop() {
  // Named for debuggers and py-spy: "ipu0-worker" (at most 15 characters).
  pthread_setname_np(pthread_self(), (name_.substr(0, 8) + "-worker").c_str());
  const Serving serving(this);
  for (;;) {
    std::function<void()> item;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (items_.empty() && !stopping_) {
        // Dispatch comes in bursts of small programs: waiting a little for the next one costs less than
        // sleeping and being woken for each (two system calls and a context switch per run).
        lock.unlock();
        const auto until = std::chrono::steady_clock::now() + kSpin;
        while (queued_.load(std::memory_order_acquire) == 0 && std::chrono::steady_clock::now() < until) {
          std::this_thread::yield();
        }
        lock.lock();
        sleeping_ = true;
        cv_.wait(lock, [this] { return stopping_ || !items_.empty(); });
        sleeping_ = false;
      }
      if (items_.empty()) return;  // stopping, and everything queued has run
      item = std::move(items_.front());
      items_.pop_front();
      queued_.store(items_.size(), std::memory_order_release);
    }
    try {
      item();
    } catch (...) {
      // Items report their own failures through their completions; nothing may escape a worker thread.
      std::fprintf(stderr, "jax-ipu: %s: unexpected failure in queued work\n", name_.c_str());
    }
    item = nullptr;  // release what the item held (input bytes) before the next one runs
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++finished_;
      pending_.fetch_sub(1, std::memory_order_release);
    }
    idle_cv_.notify_all();
  }
}

}  // namespace jax_ipu
