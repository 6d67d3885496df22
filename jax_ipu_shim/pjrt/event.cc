// PJRT_Event: completion of enqueued work. Work completes before its call returns, so events are born ready.
#include "plugin.h"

namespace jax_ipu {
PJRT_Event* ReadyEvent() { return new PJRT_Event(); }

static PJRT_Error* EventStatus(const PJRT_Event* event) {
  if (event->code == 0) return nullptr;
  return MakeError(event->code, event->message);
}
}  // namespace jax_ipu

using namespace jax_ipu;

PJRT_Error* PJRT_Event_Destroy_Impl(PJRT_Event_Destroy_Args* args) {
  delete args->event;
  return nullptr;
}

PJRT_Error* PJRT_Event_IsReady_Impl(PJRT_Event_IsReady_Args* args) {
  args->is_ready = true;
  return nullptr;
}

PJRT_Error* PJRT_Event_Error_Impl(PJRT_Event_Error_Args* args) { return EventStatus(args->event); }

PJRT_Error* PJRT_Event_Await_Impl(PJRT_Event_Await_Args* args) { return EventStatus(args->event); }

PJRT_Error* PJRT_Event_OnReady_Impl(PJRT_Event_OnReady_Args* args) {
  // Ownership of the error passes to the callback.
  args->callback(EventStatus(args->event), args->user_arg);
  return nullptr;
}
