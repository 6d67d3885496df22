// WorkQueue: one IPU's work (runs, transfers) in the order it was queued, on the device's own worker thread.
#include <pthread.h>

#include <cstdio>

#include "plugin.h"

namespace jax_ipu {

void WorkQueue::Start() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopping_) {
    throw ipu::Error(ipu::ErrorCode::Internal, name_ + ": the ipu client is being destroyed; no new work is taken");
  }
  if (!thread_.joinable()) thread_ = std::thread([self = shared_from_this()] { self->Loop(); });
}

void WorkQueue::Enqueue(std::function<void()> item) {
  Start();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    items_.push_back(std::move(item));
    ++enqueued_;
  }
  cv_.notify_one();
}

void WorkQueue::Drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  // A host callback running on this worker cannot wait for its own queue.
  if (thread_.joinable() && std::this_thread::get_id() == thread_.get_id()) return;
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
  if (std::this_thread::get_id() == thread_.get_id()) {
    thread_.detach();  // destroyed from its own work (a callback): it exits once the queue is empty
  } else {
    thread_.join();
  }
}

void WorkQueue::Loop() {
  // Named for debuggers and py-spy: "ipu0-worker" (at most 15 characters).
  pthread_setname_np(pthread_self(), (name_.substr(0, 8) + "-worker").c_str());
  for (;;) {
    std::function<void()> item;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [this] { return stopping_ || !items_.empty(); });
      if (items_.empty()) return;  // stopping, and everything queued has run
      item = std::move(items_.front());
      items_.pop_front();
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
    }
    idle_cv_.notify_all();
  }
}

}  // namespace jax_ipu
