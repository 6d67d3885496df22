// ReplicaGroup: the rendezvous of the replicas of one launch over several IPUs (what IPU-Link collectives and
// the inter-IPU sync synchronise on). A failed replica aborts the group so that no other replica waits forever.
#include "ipu/emulator.h"

namespace ipu {

ReplicaGroup::ReplicaGroup(int num_replicas)
    : size_(num_replicas < 1 ? 1 : num_replicas), posts_(static_cast<size_t>(size_), nullptr) {}

void ReplicaGroup::arrive(std::unique_lock<std::mutex>& lock) {
  if (!aborted_.empty()) throw Error(ErrorCode::Internal, aborted_);
  const uint64_t generation = generation_;
  if (++arrived_ == size_) {
    arrived_ = 0;
    published_ = posts_;
    ++generation_;
    cv_.notify_all();
    return;
  }
  cv_.wait(lock, [&] { return generation_ != generation || !aborted_.empty(); });
  if (generation_ == generation) throw Error(ErrorCode::Internal, aborted_);
}

std::vector<const void*> ReplicaGroup::exchange(int replica, const void* mine) {
  std::unique_lock<std::mutex> lock(mu_);
  if (replica < 0 || replica >= size_)
    throw Error(ErrorCode::Internal, "replica " + std::to_string(replica) + " is not in a group of " +
                                         std::to_string(size_));
  posts_[static_cast<size_t>(replica)] = mine;
  arrive(lock);
  return published_;
}

void ReplicaGroup::barrier(int /*replica*/) {
  std::unique_lock<std::mutex> lock(mu_);
  arrive(lock);
}

void ReplicaGroup::abort(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (aborted_.empty()) aborted_ = why.empty() ? std::string("another replica failed") : why;
  cv_.notify_all();
}

}  // namespace ipu
