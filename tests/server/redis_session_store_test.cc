// The Redis session store against a real redis-server (Debian's package,
// installed by scripts/test.sh), started by the test on a free port with
// nothing persisted, and stopped at the end. Skipped where redis-server is
// not installed.
#include "server/redis_session_store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <random>
#include <thread>

#include "server/http_client.h"
#include "core/error.h"
#include "server/openai_api.h"

extern char** environ;

namespace talaria {
namespace {

using testing::Eventually;

// A loopback port below the kernel's ephemeral range that nothing holds
// now. Below the range, no client socket of a test running beside this one
// can take it before redis-server binds it; another test's pick still can,
// so SetUp starts the server again on another port when it exits.
int PortBelowEphemeralRange() {
  int low = 32768;
  if (FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    if (std::fscanf(f, "%d", &low) != 1 || low <= 12000) low = 32768;
    std::fclose(f);
  }
  static std::mt19937 pick(std::random_device{}());
  for (;;) {
    const int port = std::uniform_int_distribution<int>(10000, low - 1)(pick);
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    const bool free = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    close(fd);
    if (free) return port;
  }
}

class RedisSessionStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (system("command -v redis-server > /dev/null 2>&1") != 0) GTEST_SKIP() << "redis-server is not installed";
    for (int attempt = 0; attempt < 5 && pid_ < 0; ++attempt) ASSERT_NO_FATAL_FAILURE(StartRedis());
    ASSERT_GT(pid_, 0) << "redis-server exited at start on five ports";
    store_ = Store(1.0);
  }
  // Starts redis-server on a fresh port and waits until it answers; leaves
  // pid_ at -1 if it exited first (its port was taken after the pick).
  void StartRedis() {
    port_ = PortBelowEphemeralRange();
    const std::string port = std::to_string(port_);
    const char* argv[] = {"redis-server", "--port",    port.c_str(), "--bind", "127.0.0.1", "--save", "",
                          "--appendonly", "no",        "--enable-debug-command", "local", "--loglevel",
                          "warning",      nullptr};
    posix_spawn_file_actions_t quiet;  // its start-up banner is not the test's output
    posix_spawn_file_actions_init(&quiet);
    posix_spawn_file_actions_addopen(&quiet, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&quiet, 2, "/dev/null", O_WRONLY, 0);
    pid_t pid = -1;
    const int spawned = posix_spawnp(&pid, "redis-server", &quiet, nullptr, const_cast<char**>(argv), environ);
    posix_spawn_file_actions_destroy(&quiet);
    ASSERT_EQ(spawned, 0);
    bool exited = false;
    const auto probe = Store(1.0);
    ASSERT_TRUE(Eventually([&] {
      exited = waitpid(pid, nullptr, WNOHANG) == pid;
      return exited || probe->Ping() == SessionStore::Status::kOk;
    }));
    if (exited) return;
    // Another test's server on the port would answer too: the one answering
    // must be this one.
    if (ServerPid() == pid) {
      pid_ = pid;
      return;
    }
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  // The process id the redis-server on port_ reports, or -1.
  pid_t ServerPid() const {
    const std::string command = "redis-cli -p " + std::to_string(port_) + " INFO server 2> /dev/null";
    FILE* out = popen(command.c_str(), "r");
    if (out == nullptr) return -1;
    long pid = -1;
    char line[256];
    while (std::fgets(line, sizeof line, out) != nullptr) std::sscanf(line, "process_id:%ld", &pid);
    pclose(out);
    return static_cast<pid_t>(pid);
  }
  void TearDown() override {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  std::unique_ptr<RedisSessionStore> Store(double time_scale, double timeout_s = 0.5) {
    RedisAddress a;
    a.host = "127.0.0.1";
    a.port = port_;
    return std::make_unique<RedisSessionStore>(a, timeout_s, time_scale);
  }
  static SessionRecord Record(const std::string& instance) {
    SessionRecord r;
    r.instance = instance;
    r.model = "m";
    r.kv_tokens = 1234;
    r.context_tokens = 1200;
    r.context_hash = 0xfedcba9876543210ULL;
    return r;
  }
  std::int32_t LiveOn(const std::string& instance) {
    std::vector<LeaseCount> pairs = {{instance, "m", -1}};
    EXPECT_EQ(store_->CountLeases(pairs), SessionStore::Status::kOk);
    return pairs[0].live;
  }

  pid_t pid_ = -1;
  int port_ = 0;
  std::unique_ptr<RedisSessionStore> store_;
};

TEST(RedisUrlTest, ParsesHostPortDatabaseAndPassword) {
  RedisAddress a;
  std::string error;
  ASSERT_TRUE(ParseRedisUrl("redis://:s3cret@10.0.0.5:6380/2", a, error)) << error;
  EXPECT_EQ(a.host, "10.0.0.5");
  EXPECT_EQ(a.port, 6380);
  EXPECT_EQ(a.db, 2);
  EXPECT_EQ(a.password, "s3cret");
  EXPECT_EQ(a.user, "");
  RedisAddress acl;
  ASSERT_TRUE(ParseRedisUrl("redis://gateway:pw@cache:6379", acl, error)) << error;
  EXPECT_EQ(acl.user, "gateway");
  EXPECT_EQ(acl.password, "pw");
  EXPECT_FALSE(ParseRedisUrl("redis://pw@cache", a, error));
  EXPECT_NE(error.find("USER:PASSWORD"), std::string::npos);
  RedisAddress d;
  ASSERT_TRUE(ParseRedisUrl("redis://cache", d, error));
  EXPECT_EQ(d.port, 6379);
  EXPECT_EQ(d.db, 0);
  EXPECT_FALSE(ParseRedisUrl("http://cache:6379", a, error));
  EXPECT_NE(error.find("redis://"), std::string::npos);
  EXPECT_FALSE(ParseRedisUrl("redis://cache:99999", a, error));
  EXPECT_NE(error.find("port '99999'"), std::string::npos);
  EXPECT_FALSE(ParseRedisUrl("redis://cache/x", a, error));
  EXPECT_FALSE(ParseRedisUrl("redis://:6379", a, error));
  EXPECT_THROW(MakeSessionStore("redis:/x", 0.05, 1, "--state"), InputError);
}

TEST_F(RedisSessionStoreTest, ARecordAndItsLeaseAreTakenOnce) {
  std::optional<SessionRecord> out;
  ASSERT_EQ(store_->Take("t:s", out), SessionStore::Status::kOk);
  EXPECT_FALSE(out);
  ASSERT_EQ(store_->Complete("t:s", Record("w1"), 30, 600), SessionStore::Status::kOk);
  ASSERT_EQ(store_->Take("t:s", out), SessionStore::Status::kOk);
  ASSERT_TRUE(out);
  EXPECT_EQ(out->instance, "w1");
  EXPECT_EQ(out->model, "m");
  EXPECT_EQ(out->kv_tokens, 1234);
  EXPECT_EQ(out->context_tokens, 1200);
  EXPECT_EQ(out->context_hash, 0xfedcba9876543210ULL);
  EXPECT_GE(out->done_age_s, 0);
  EXPECT_LT(out->done_age_s, 30);
  EXPECT_TRUE(out->lease);
  EXPECT_GT(out->lease_left_s, 0);
  EXPECT_LE(out->lease_left_s, 30);
  // The record stays; the lease was taken.
  ASSERT_EQ(store_->Take("t:s", out), SessionStore::Status::kOk);
  ASSERT_TRUE(out);
  EXPECT_FALSE(out->lease);
}

TEST_F(RedisSessionStoreTest, ConcurrentTakesHandTheLeaseToOneCaller) {
  for (int round = 0; round < 20; ++round) {
    const std::string id = "t:race-" + std::to_string(round);
    ASSERT_EQ(store_->Complete(id, Record("w0"), 30, 600), SessionStore::Status::kOk);
    std::atomic<int> leases{0};
    std::vector<std::thread> takers;
    for (int t = 0; t < 4; ++t) {
      takers.emplace_back([&] {
        std::optional<SessionRecord> out;
        if (store_->Take(id, out) == SessionStore::Status::kOk && out && out->lease) ++leases;
      });
    }
    for (auto& t : takers) t.join();
    EXPECT_EQ(leases.load(), 1) << "round " << round;
  }
}

TEST_F(RedisSessionStoreTest, LeaseCountsFollowInstallsTakesAndExpiry) {
  ASSERT_EQ(store_->Complete("t:a", Record("w0"), 30, 600), SessionStore::Status::kOk);
  ASSERT_EQ(store_->Complete("t:b", Record("w0"), 30, 600), SessionStore::Status::kOk);
  ASSERT_EQ(store_->Complete("t:c", Record("w1"), 30, 600), SessionStore::Status::kOk);
  EXPECT_EQ(LiveOn("w0"), 2);
  EXPECT_EQ(LiveOn("w1"), 1);
  std::optional<SessionRecord> out;
  ASSERT_EQ(store_->Take("t:a", out), SessionStore::Status::kOk);
  EXPECT_TRUE(Eventually([&] { return LiveOn("w0") == 1; }));
  // A short lease (50 ms) leaves the count and is not handed out once it expired.
  ASSERT_EQ(store_->Complete("t:d", Record("w2"), 0.05, 600), SessionStore::Status::kOk);
  EXPECT_TRUE(Eventually([&] { return LiveOn("w2") == 0; }));
  ASSERT_EQ(store_->Take("t:d", out), SessionStore::Status::kOk);
  ASSERT_TRUE(out);
  EXPECT_FALSE(out->lease);
}

TEST_F(RedisSessionStoreTest, DurationsAreInTheGatewaysEmulatedSeconds) {
  auto fast = Store(/*time_scale=*/100);  // 100 emulated seconds per wall second
  ASSERT_EQ(fast->Complete("t:s", Record("w0"), 20, 600), SessionStore::Status::kOk);  // 200 ms of wall time
  EXPECT_TRUE(Eventually([&] { return LiveOn("w0") == 0; }));
  std::optional<SessionRecord> out;
  ASSERT_EQ(fast->Take("t:s", out), SessionStore::Status::kOk);
  ASSERT_TRUE(out);
  EXPECT_GE(out->done_age_s, 20);  // at least 200 ms of wall time, 100x
}

TEST_F(RedisSessionStoreTest, TwoApiKeysNeverShareAKey) {
  const std::string a = ScopedSessionId("key-a", "agent");
  const std::string b = ScopedSessionId("key-b", "agent");
  EXPECT_NE(RedisSessionStore::SessionKey(a), RedisSessionStore::SessionKey(b));
  EXPECT_NE(RedisSessionStore::LeaseKey(a), RedisSessionStore::LeaseKey(b));
  ASSERT_EQ(store_->Complete(a, Record("w0"), 30, 600), SessionStore::Status::kOk);
  std::optional<SessionRecord> out;
  ASSERT_EQ(store_->Take(b, out), SessionStore::Status::kOk);
  EXPECT_FALSE(out);
  // Keys of one session share a hash tag (one Redis Cluster slot).
  const std::string s = RedisSessionStore::SessionKey(a);
  const std::string l = RedisSessionStore::LeaseKey(a);
  EXPECT_EQ(s.substr(s.find('{')), l.substr(l.find('{')));
}

TEST_F(RedisSessionStoreTest, ASlowOrAbsentRedisIsUnavailableWithinTheTimeout) {
  auto quick = Store(1, /*timeout_s=*/0.05);
  ASSERT_EQ(quick->Ping(), SessionStore::Status::kOk);
  // Redis busy for 0.5 s: every operation gives up after 50 ms.
  std::thread busy([&] {
    const std::string sleep = "redis-cli -p " + std::to_string(port_) + " DEBUG SLEEP 0.5 > /dev/null 2>&1";
    EXPECT_EQ(system(sleep.c_str()), 0);
  });
  EXPECT_TRUE(Eventually([&] {
    std::optional<SessionRecord> out;
    return quick->Take("t:s", out) == SessionStore::Status::kUnavailable;
  }));
  busy.join();
  EXPECT_TRUE(Eventually([&] { return quick->Ping() == SessionStore::Status::kOk; }));
  // Nothing listening at all.
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
  std::optional<SessionRecord> out;
  EXPECT_EQ(quick->Take("t:s", out), SessionStore::Status::kUnavailable);
  EXPECT_EQ(quick->Complete("t:s", Record("w0"), 1, 600), SessionStore::Status::kUnavailable);
}

}  // namespace
}  // namespace talaria
