// ReplicaGroup: the rendezvous of the replicas of one launch over several IPUs (what IPU-Link collectives and
// the inter-IPU sync synchronise on). A failed replica aborts the group so that no other replica waits forever.
//
// Replicas in other processes (several hosts) take part through RemoteReplicas: once every local replica has
// posted, the last one to arrive hands the local posts to the transport and gets the remote ones back (the lock
// released meanwhile, so that an abort is never held up by the network), then publishes them all.
#include "ipu/emulator.h"

namespace ipu {

ReplicaGroup::ReplicaGroup(int num_replicas)
    : size_(num_replicas < 1 ? 1 : num_replicas), local_count_(size_), posts_(static_cast<size_t>(size_), nullptr) {
  for (int r = 0; r < size_; ++r) local_.push_back(r);
}

ReplicaGroup::ReplicaGroup(int num_replicas, std::vector<int> local, std::shared_ptr<RemoteReplicas> remote)
    : size_(num_replicas < 1 ? 1 : num_replicas), local_count_(static_cast<int>(local.size())),
      remote_(std::move(remote)), local_(std::move(local)), posts_(static_cast<size_t>(size_), nullptr) {
  for (int r : local_) {
    if (r < 0 || r >= size_)
      throw Error(ErrorCode::Internal,
                  "replica " + std::to_string(r) + " is not in a group of " + std::to_string(size_));
  }
}

void ReplicaGroup::arrive(std::unique_lock<std::mutex>& lock) {
  if (!aborted_.empty()) throw Error(ErrorCode::Internal, aborted_);
  const uint64_t generation = generation_;
  if (++arrived_ == local_count_) {
    arrived_ = 0;
    if (remote_) {
      std::vector<std::pair<int, const ReplicaPost*>> mine;
      mine.reserve(local_.size());
      for (int r : local_) mine.emplace_back(r, posts_[static_cast<size_t>(r)]);
      std::vector<RemoteReplicas::Received> got;
      std::string failure;
      lock.unlock();
      try {
        got = remote_->step(generation, mine);
      } catch (const std::exception& e) { failure = e.what(); }
      lock.lock();
      if (!failure.empty() && aborted_.empty()) abortLocked(failure, false);
      if (!aborted_.empty()) throw Error(ErrorCode::Internal, aborted_);  // the waiting replicas throw too
      received_ = std::move(got);
      for (RemoteReplicas::Received& r : received_) {
        if (r.replica < 0 || r.replica >= size_) continue;
        r.post.bytes = r.data.data();
        r.post.size = r.data.size();
        posts_[static_cast<size_t>(r.replica)] = r.post.tag == ReplicaPost::kEnded ? nullptr : &r.post;
      }
    }
    published_ = posts_;
    ++generation_;
    cv_.notify_all();
    return;
  }
  cv_.wait(lock, [&] { return generation_ != generation || !aborted_.empty(); });
  if (generation_ == generation) throw Error(ErrorCode::Internal, aborted_);
}

std::vector<const ReplicaPost*> ReplicaGroup::exchange(int replica, const ReplicaPost* mine) {
  std::unique_lock<std::mutex> lock(mu_);
  if (replica < 0 || replica >= size_)
    throw Error(ErrorCode::Internal,
                "replica " + std::to_string(replica) + " is not in a group of " + std::to_string(size_));
  posts_[static_cast<size_t>(replica)] = mine;
  arrive(lock);
  return published_;
}

void ReplicaGroup::barrier(int replica) {
  static const ReplicaPost kAtBarrier{ReplicaPost::kBarrier, nullptr, 0};
  std::unique_lock<std::mutex> lock(mu_);
  if (replica >= 0 && replica < size_) posts_[static_cast<size_t>(replica)] = &kAtBarrier;
  arrive(lock);
}

void ReplicaGroup::abortLocked(const std::string& why, bool tell_remote) {
  if (aborted_.empty()) {
    aborted_ = why.empty() ? std::string("another replica failed") : why;
    if (tell_remote && remote_) remote_->abort(aborted_);
  }
  cv_.notify_all();
}

void ReplicaGroup::abort(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  abortLocked(why, true);
}

}  // namespace ipu
