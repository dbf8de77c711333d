// HTTP basic authentication against bcrypt hashes (the web-config's basic_auth_users),
// verified with libcrypt's crypt_r ($2y$, $2b$ and $2a$ alike) and compared in constant time.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "exporter/credential_digest.hpp"
#include "exporter/fair_turns.hpp"

namespace gpureap {

struct BasicCredentials {
  std::string user;
  std::string password;
};

// "Basic <base64 of user:password>" (the scheme's case ignored); nullopt for anything else:
// another scheme, bad base64, no ':'. Input from the network: bounded, never trusted.
std::optional<BasicCredentials> parse_basic_authorization(std::string_view header);

// $2a$, $2b$ or $2y$, a two-digit cost from 04 to 31, '$', then 53 characters of bcrypt's
// alphabet (22 of salt, 31 of hash).
bool bcrypt_hash_is_valid(std::string_view hash);
// Whether `password` hashes to `hash`; the comparison takes the same time wherever they differ.
bool bcrypt_verify(std::string_view password, const std::string& hash);

// What basic auth answers a request.
enum class AuthDecision {
  kAllowed,
  kRefused,  // no or wrong credentials: 401
  kBusy,     // bcrypt's queue is full for this peer: 429 at once, nothing verified
};

struct BasicAuthLimits {
  FairTurnLimits turns;
  std::chrono::seconds success_lifetime{std::chrono::minutes(15)};
  std::chrono::milliseconds max_wait{std::chrono::seconds(10)};  // for a turn at bcrypt
};

// Basic auth that a flood of wrong passwords cannot make slow for anyone else, as
// Prometheus's exporter-toolkit does it and more:
// - a success is remembered (by a keyed digest of the credentials, credential_digest.hpp,
//   never the password) until it goes unused for `success_lifetime`, so a scraper that
//   authenticated once never waits for bcrypt again; a flood cannot push it out, as failures
//   are remembered apart;
// - a failure is remembered too (the last kMaxRememberedFailures), so a repeated wrong
//   password costs nothing;
// - bcrypt, tens to hundreds of milliseconds by design, runs at most `turns.running` at a
//   time, from a bounded queue served in rotation between peers (fair_turns.hpp); a request
//   beyond it is answered kBusy at once.
class BasicAuthenticator {
 public:
  static constexpr std::size_t kMaxRememberedFailures = 1024;
  static constexpr std::size_t kMaxRememberedSuccesses = 256;

  using Limits = BasicAuthLimits;

  explicit BasicAuthenticator(std::map<std::string, std::string> users, Limits limits = {});

  // Whether the Authorization header names a user with the right password; `peer` is the
  // client's address (for the queue's rotation). An unknown user costs a bcrypt run of the
  // configured users' cost too, so the time taken does not tell names apart.
  AuthDecision check(std::string_view authorization_header, std::string_view peer);
  bool allows(std::string_view authorization_header) {
    return check(authorization_header, "") == AuthDecision::kAllowed;
  }

  // How many times bcrypt has run, and requests answered kBusy (for tests and metrics).
  std::uint64_t bcrypt_runs() const { return bcrypt_runs_.load(); }
  std::uint64_t busy_answers() const { return busy_answers_.load(); }
  // Threads that may hold or wait for a bcrypt turn at once: the HTTP server needs as many
  // workers beyond those that serve everything else.
  unsigned most_waiting_workers() const { return limits_.turns.most_held(); }

 private:
  using Clock = std::chrono::steady_clock;
  std::optional<bool> remembered(const CredentialDigest& key);
  void remember(const CredentialDigest& key, bool outcome);
  bool verify(const BasicCredentials& credentials);

  const Limits limits_;
  std::map<std::string, std::string> users_;
  std::string dummy_hash_;
  CredentialHasher hasher_;
  FairTurns turns_;
  std::mutex cache_mutex_;
  std::map<CredentialDigest, Clock::time_point> successes_;  // digest -> last used
  std::set<CredentialDigest> failures_;
  std::deque<CredentialDigest> failure_order_;  // oldest first: the first forgotten
  std::atomic<std::uint64_t> bcrypt_runs_{0};
  std::atomic<std::uint64_t> busy_answers_{0};
};

// Equal in time independent of where they differ (their lengths may show).
bool equal_in_constant_time(std::string_view a, std::string_view b);

}  // namespace gpureap
