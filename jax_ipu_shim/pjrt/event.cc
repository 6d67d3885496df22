// PJRT_Event: completion of queued work (a run on an IPU, a transfer). Callbacks run on the thread that completes
// the work (a device's worker), or at once on the caller's thread if it is already complete.
#include "plugin.h"

namespace jax_ipu {

std::shared_ptr<Completion> Completion::Ready() {
  // Never destroyed: buffers that outlive static destruction may still hold it.
  static const std::shared_ptr<Completion>* const ready = [] {
    auto c = std::make_shared<Completion>();
    c->ready_.store(true, std::memory_order_release);
    return new std::shared_ptr<Completion>(std::move(c));
  }();
  return *ready;
}

void Completion::Set(PJRT_Error_Code code, std::string message) {
  std::vector<Callback> callbacks;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (ready_.load(std::memory_order_relaxed)) return;
    code_ = code;
    message_ = std::move(message);
    ready_.store(true, std::memory_order_release);
    callbacks.swap(callbacks_);
  }
  cv_.notify_all();
  // code_ and message_ no longer change: callbacks may read them without the lock.
  for (Callback& callback : callbacks) callback(code_, message_);
}

bool Completion::IsReady() { return ready_.load(std::memory_order_acquire); }

void Completion::Wait() {
  if (ready_.load(std::memory_order_acquire)) return;
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [this] { return ready_.load(std::memory_order_relaxed); });
}

PJRT_Error* Completion::ToError() {
  Wait();
  return code_ == 0 ? nullptr : MakeError(code_, message_);
}

void Completion::OnReady(Callback callback) {
  if (!ready_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!ready_) {
      callbacks_.push_back(std::move(callback));
      return;
    }
  }
  callback(code_, message_);
}

PJRT_Event* NewEvent(std::shared_ptr<Completion> completion) { return new PJRT_Event{std::move(completion)}; }

PJRT_Event* ReadyEvent() { return NewEvent(Completion::Ready()); }

}  // namespace jax_ipu

using namespace jax_ipu;

PJRT_Error* PJRT_Event_Destroy_Impl(PJRT_Event_Destroy_Args* args) {
  delete args->event;
  return nullptr;
}

PJRT_Error* PJRT_Event_IsReady_Impl(PJRT_Event_IsReady_Args* args) {
  args->is_ready = args->event->completion->IsReady();
  return nullptr;
}

PJRT_Error* PJRT_Event_Error_Impl(PJRT_Event_Error_Args* args) { return args->event->completion->ToError(); }

PJRT_Error* PJRT_Event_Await_Impl(PJRT_Event_Await_Args* args) { return args->event->completion->ToError(); }

PJRT_Error* PJRT_Event_OnReady_Impl(PJRT_Event_OnReady_Args* args) {
  PJRT_Event_OnReadyCallback callback = args->callback;
  void* user_arg = args->user_arg;
  Completion& completion = *args->event->completion;
  if (completion.IsReady()) {  // the usual case after a run inline: no std::function, no lock
    callback(completion.code() == 0 ? nullptr : MakeError(completion.code(), completion.message()), user_arg);
    return nullptr;
  }
  // The callback owns the error it is given; jaxlib may destroy the event inside it.
  args->event->completion->OnReady([callback, user_arg](PJRT_Error_Code code, const std::string& message) {
    callback(code == 0 ? nullptr : MakeError(code, message), user_arg);
  });
  return nullptr;
}
