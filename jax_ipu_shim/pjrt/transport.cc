// The transport between the processes of a jax.distributed job (several hosts, each with its emulated IPUs): what
// carries a collective's data from IPUs of one process to IPUs of another.
//
// Setup. The Python plugin (jax_ipu/backend/multihost.py) calls JaxIpu_TransportListen before the client exists,
// publishes host:port in jax's coordination service (its key-value store: no rendezvous of our own), reads every other
// process's, and the client connects: one outgoing TCP connection to each other process, used only to send, and
// one incoming from each, read by a thread of its own that files what arrives by (launch, step, process).
//
// A step. Every launch of a program over IPUs of several processes gets the next launch number (each process
// launches the same programs in the same order: jax's multi-controller model). At each step of its ReplicaGroup
// (ReplicaGroup calls step() once the local replicas have posted) a process sends one frame to each other process of
// the launch: the launch and step numbers, a hash of the program's name, and each local replica's post (its tag and
// operand bytes); then it waits for their frames of the same step. Data goes to every process that takes part, and
// each process computes the collective's result for its own replicas, from the same posts in the same replica
// order: the results are the same as in one process, bit for bit.
//
// Failure. A process that ends or dies closes its connections: a step waiting for it fails at once, naming it. One
// that stops answering fails the step after the timeout (JAX_IPU_COLLECTIVE_TIMEOUT). A replica that fails sends an
// abort frame, so the other processes fail with its message instead of waiting. Nothing waits forever.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <tuple>

#include "jax_ipu/c_api.h"
#include "plugin.h"

namespace jax_ipu {
namespace {

constexpr uint32_t kMagic = 0x5550494a;  // "JIPU"
constexpr uint32_t kHello = 0, kStep = 1, kAbort = 2;

bool WriteAll(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::send(fd, p, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool ReadAll(int fd, void* data, size_t size) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t n = ::recv(fd, p, size, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

template <class T>
void Put(std::string* out, T value) {
  out->append(reinterpret_cast<const char*>(&value), sizeof value);
}

// One step's frame from one process.
struct Frame {
  uint64_t program = 0;
  std::vector<ipu::RemoteReplicas::Received> posts;
};

class Transport {
 public:
  static Transport& Get() {
    static Transport* transport = new Transport();  // never destroyed: its threads may outlive static destructors
    return *transport;
  }

  int Listen() {
    std::lock_guard<std::mutex> lock(mu_);
    if (listen_fd_ >= 0) return port_;
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
      throw ipu::Error(ipu::ErrorCode::Internal, std::string("ipu transport: socket: ") + std::strerror(errno));
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = 0;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 64) != 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      throw ipu::Error(ipu::ErrorCode::Internal, "ipu transport: cannot listen for the other processes: " + why);
    }
    socklen_t len = sizeof addr;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    listen_fd_ = fd;
    port_ = ntohs(addr.sin_port);
    std::thread([this] { AcceptLoop(); }).detach();
    return port_;
  }

  void Connect(int me, const std::vector<std::string>& addresses, double timeout_seconds) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      me_ = me;
      addresses_ = addresses;
      timeout_ = std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000));
      out_fds_.assign(addresses.size(), -1);
      send_mu_.clear();
      for (size_t i = 0; i < addresses.size(); ++i) send_mu_.push_back(std::make_unique<std::mutex>());
    }
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    for (size_t j = 0; j < addresses.size(); ++j) {
      if (static_cast<int>(j) == me) continue;
      const int fd = Dial(addresses[j], deadline, static_cast<int>(j));
      std::string hello;
      Put<uint32_t>(&hello, kMagic);
      Put<uint32_t>(&hello, kHello);
      Put<int32_t>(&hello, me);
      if (!WriteAll(fd, hello.data(), hello.size()))
        throw ipu::Error(ipu::ErrorCode::Internal,
                         "ipu transport: " + Name(static_cast<int>(j)) + " refused the connection");
      std::lock_guard<std::mutex> lock(mu_);
      out_fds_[j] = fd;
    }
  }

  uint64_t NextLaunch() {
    std::lock_guard<std::mutex> lock(mu_);
    return next_launch_++;
  }

  // Sends a step's frame to `processes`, waits for theirs.
  std::vector<ipu::RemoteReplicas::Received> Step(uint64_t launch, uint64_t step, uint64_t program,
                                                  const std::string& program_name, const std::vector<int>& processes,
                                                  const std::vector<std::pair<int, const ipu::ReplicaPost*>>& local) {
    std::string frame;
    Put<uint32_t>(&frame, kMagic);
    Put<uint32_t>(&frame, kStep);
    Put<uint64_t>(&frame, launch);
    Put<uint64_t>(&frame, step);
    Put<uint64_t>(&frame, program);
    Put<uint32_t>(&frame, static_cast<uint32_t>(local.size()));
    for (const auto& [replica, post] : local) {
      Put<int32_t>(&frame, replica);
      Put<int32_t>(&frame, post ? post->tag : ipu::ReplicaPost::kEnded);
      const uint64_t size = post && post->bytes ? post->size : 0;
      Put<uint64_t>(&frame, size);
      if (size) frame.append(reinterpret_cast<const char*>(post->bytes), size);
    }
    for (int j : processes) Send(j, frame, program_name);
    std::vector<ipu::RemoteReplicas::Received> out;
    const uint64_t interrupts = InterruptsSeenByThisThread();
    std::unique_lock<std::mutex> lock(mu_);
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    for (int j : processes) {
      const auto key = std::make_tuple(launch, step, j);
      while (true) {
        auto aborted = aborts_.find(launch);
        if (aborted != aborts_.end()) throw ipu::Error(ipu::ErrorCode::Internal, aborted->second);
        auto it = frames_.find(key);
        if (it != frames_.end()) {
          if (it->second.program != program)
            throw ipu::Error(ipu::ErrorCode::InvalidArgument,
                             program_name + ": " + Name(j) + " runs a different program at launch " +
                                 std::to_string(launch) +
                                 " of the IPUs of several processes; every process must "
                                 "launch the same programs in the same order");
          for (auto& post : it->second.posts) out.push_back(std::move(post));
          frames_.erase(it);
          break;
        }
        if (!dead_[j].empty())
          throw ipu::Error(ipu::ErrorCode::Internal, program_name + ": " + Name(j) + " " + dead_[j] +
                                                         " while this process (" + std::to_string(me_) +
                                                         ") waits for it at a collective");
        ThrowIfInterrupted(interrupts, program_name + ", waiting for " + Name(j) + " at a collective,");
        const auto until = std::min(deadline, std::chrono::steady_clock::now() + kInterruptPoll);
        if (cv_.wait_until(lock, until) == std::cv_status::timeout && std::chrono::steady_clock::now() >= deadline &&
            frames_.find(key) == frames_.end() && aborts_.find(launch) == aborts_.end() && dead_[j].empty()) {
          throw ipu::Error(ipu::ErrorCode::Internal,
                           program_name + ": " + Name(j) + " sent nothing for " +
                               std::to_string(timeout_.count() / 1000) +
                               " s while this process waits for it at a collective (JAX_IPU_COLLECTIVE_TIMEOUT)");
        }
      }
    }
    return out;
  }

  void Abort(uint64_t launch, const std::vector<int>& processes, const std::string& why) {
    std::string frame;
    Put<uint32_t>(&frame, kMagic);
    Put<uint32_t>(&frame, kAbort);
    Put<uint64_t>(&frame, launch);
    const std::string text = "process " + std::to_string(me_) + " failed: " + why;
    Put<uint64_t>(&frame, text.size());
    frame += text;
    for (int j : processes) {
      try {
        Send(j, frame, "");
      } catch (const std::exception&) {  // best effort: that process may be gone already
      }
    }
  }

 private:
  std::string Name(int j) const {
    return "process " + std::to_string(j) +
           (j >= 0 && static_cast<size_t>(j) < addresses_.size() ? " (" + addresses_[static_cast<size_t>(j)] + ")"
                                                                 : std::string());
  }

  int Dial(const std::string& address, std::chrono::steady_clock::time_point deadline, int j) {
    const size_t colon = address.rfind(':');
    const std::string host = address.substr(0, colon), port = address.substr(colon + 1);
    std::string last = "no attempt";
    while (true) {
      addrinfo hints{}, *found = nullptr;
      hints.ai_family = AF_INET;
      hints.ai_socktype = SOCK_STREAM;
      if (::getaddrinfo(host.c_str(), port.c_str(), &hints, &found) == 0 && found) {
        const int fd = ::socket(found->ai_family, found->ai_socktype, found->ai_protocol);
        if (fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) == 0) {
          ::freeaddrinfo(found);
          const int one = 1;
          ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          return fd;
        }
        const int error = errno;
        last = std::strerror(error);
        if (fd >= 0) ::close(fd);
        ::freeaddrinfo(found);
        // Every process listens before it publishes its address: a refusal means it has gone, not that it is
        // late. (A listener whose backlog is full drops the handshake, which is retried, rather than refusing.)
        if (fd >= 0 && error == ECONNREFUSED)
          throw ipu::Error(ipu::ErrorCode::Internal, "ipu transport: " + Name(j) +
                                                         " refused the connection: it ended or failed after it "
                                                         "published its address (" +
                                                         last + ")");
      } else {
        last = "cannot resolve " + host;
      }
      if (std::chrono::steady_clock::now() > deadline)
        throw ipu::Error(ipu::ErrorCode::Internal, "ipu transport: cannot connect to " + Name(j) + ": " + last);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  void Send(int j, const std::string& frame, const std::string& program_name) {
    int fd;
    {
      std::lock_guard<std::mutex> lock(mu_);
      fd = static_cast<size_t>(j) < out_fds_.size() ? out_fds_[static_cast<size_t>(j)] : -1;
    }
    if (fd < 0) throw ipu::Error(ipu::ErrorCode::Internal, "ipu transport: no connection to " + Name(j));
    std::lock_guard<std::mutex> lock(*send_mu_[static_cast<size_t>(j)]);
    if (!WriteAll(fd, frame.data(), frame.size()))
      throw ipu::Error(
          ipu::ErrorCode::Internal,
          program_name + ": " + Name(j) + " closed its connection (it ended or failed): " + std::strerror(errno));
  }

  void AcceptLoop() {
    while (true) {
      const int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) {
        if (errno == EINTR) continue;
        return;
      }
      std::thread([this, fd] { ReadLoop(fd); }).detach();
    }
  }

  void ReadLoop(int fd) {
    uint32_t head[2];
    int32_t from = -1;
    if (!ReadAll(fd, head, sizeof head) || head[0] != kMagic || head[1] != kHello || !ReadAll(fd, &from, sizeof from)) {
      ::close(fd);
      return;
    }
    while (true) {
      uint32_t h[2];
      if (!ReadAll(fd, h, sizeof h) || h[0] != kMagic) break;
      uint64_t launch = 0;
      if (!ReadAll(fd, &launch, sizeof launch)) break;
      if (h[1] == kAbort) {
        uint64_t size = 0;
        if (!ReadAll(fd, &size, sizeof size)) break;
        std::string why(size, '\0');
        if (!ReadAll(fd, why.data(), size)) break;
        std::lock_guard<std::mutex> lock(mu_);
        aborts_.emplace(launch, why);
        cv_.notify_all();
        continue;
      }
      uint64_t step = 0;
      uint32_t count = 0;
      Frame frame;
      if (!ReadAll(fd, &step, sizeof step) || !ReadAll(fd, &frame.program, sizeof frame.program) ||
          !ReadAll(fd, &count, sizeof count))
        break;
      bool ok = true;
      for (uint32_t k = 0; k < count && ok; ++k) {
        ipu::RemoteReplicas::Received r;
        int32_t replica = 0, tag = 0;
        uint64_t size = 0;
        ok = ReadAll(fd, &replica, sizeof replica) && ReadAll(fd, &tag, sizeof tag) && ReadAll(fd, &size, sizeof size);
        if (!ok) break;
        r.replica = replica;
        r.post.tag = tag;
        r.data.resize(size);
        ok = size == 0 || ReadAll(fd, r.data.data(), size);
        frame.posts.push_back(std::move(r));
      }
      if (!ok) break;
      std::lock_guard<std::mutex> lock(mu_);
      frames_[std::make_tuple(launch, step, static_cast<int>(from))] = std::move(frame);
      cv_.notify_all();
    }
    ::close(fd);
    std::lock_guard<std::mutex> lock(mu_);
    dead_[from] = "closed its connection (it ended or failed)";
    cv_.notify_all();
  }

  std::mutex mu_;
  std::condition_variable cv_;
  int listen_fd_ = -1;
  int port_ = 0;
  int me_ = 0;
  std::vector<std::string> addresses_;
  std::vector<int> out_fds_;
  std::vector<std::unique_ptr<std::mutex>> send_mu_;
  std::chrono::milliseconds timeout_{300000};
  uint64_t next_launch_ = 0;
  std::map<std::tuple<uint64_t, uint64_t, int>, Frame> frames_;
  std::map<uint64_t, std::string> aborts_;
  std::map<int, std::string> dead_;
};

// The processes other than this one that run replicas of one launch.
class LaunchReplicas : public RemoteLaunchReplicas {
 public:
  LaunchReplicas(std::string program, std::vector<int> processes)
      : program_(std::move(program)), hash_(Fnv1a64(program_)), processes_(std::move(processes)) {}

  void Number() override { launch_ = Transport::Get().NextLaunch(); }

  std::vector<Received> step(uint64_t step,
                             const std::vector<std::pair<int, const ipu::ReplicaPost*>>& local) override {
    return Transport::Get().Step(launch_, step, hash_, program_, processes_, local);
  }

  void abort(const std::string& why) override { Transport::Get().Abort(launch_, processes_, why); }

 private:
  uint64_t launch_ = 0;
  const std::string program_;
  const uint64_t hash_;
  const std::vector<int> processes_;
};

}  // namespace

std::shared_ptr<RemoteLaunchReplicas> RemoteLaunch(const std::string& program, const std::vector<int>& processes) {
  return std::make_shared<LaunchReplicas>(program, processes);
}

int TransportListen() { return Transport::Get().Listen(); }

void TransportConnect(int me, const std::vector<std::string>& addresses, double timeout_seconds) {
  Transport::Get().Connect(me, addresses, timeout_seconds);
}

}  // namespace jax_ipu


// Called by jax_ipu.backend.multihost before the client exists: the port the other processes connect to (0 on failure).
int JaxIpu_TransportListen() {
  try {
    return jax_ipu::TransportListen();
  } catch (const std::exception&) { return 0; }
}
