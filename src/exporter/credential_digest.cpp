#include "exporter/credential_digest.hpp"

#include <sys/random.h>

#include <cstring>
#include <stdexcept>
#include <string>

namespace gpureap {
namespace {

constexpr std::uint64_t rotl(std::uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

struct SipState {
  std::uint64_t v0, v1, v2, v3;
  void round() {
    v0 += v1; v1 = rotl(v1, 13); v1 ^= v0; v0 = rotl(v0, 32);
    v2 += v3; v3 = rotl(v3, 16); v3 ^= v2;
    v0 += v3; v3 = rotl(v3, 21); v3 ^= v0;
    v2 += v1; v1 = rotl(v1, 17); v1 ^= v2; v2 = rotl(v2, 32);
  }
  void absorb(std::uint64_t m) {
    v3 ^= m;
    round();
    round();
    v0 ^= m;
  }
};

std::uint64_t load_le(const unsigned char* p, std::size_t n) {
  std::uint64_t out = 0;
  for (std::size_t i = 0; i < n; ++i) out |= static_cast<std::uint64_t>(p[i]) << (8 * i);
  return out;
}

}  // namespace

std::uint64_t siphash24(std::uint64_t k0, std::uint64_t k1, std::string_view data) {
  SipState s{k0 ^ 0x736f6d6570736575ULL, k1 ^ 0x646f72616e646f6dULL, k0 ^ 0x6c7967656e657261ULL,
             k1 ^ 0x7465646279746573ULL};
  const auto* bytes = reinterpret_cast<const unsigned char*>(data.data());
  const std::size_t whole = data.size() / 8 * 8;
  for (std::size_t i = 0; i < whole; i += 8) s.absorb(load_le(bytes + i, 8));
  const std::uint64_t last = load_le(bytes + whole, data.size() - whole) | (static_cast<std::uint64_t>(data.size()) << 56);
  s.absorb(last);
  s.v2 ^= 0xff;
  for (int i = 0; i < 4; ++i) s.round();
  return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}

CredentialHasher::CredentialHasher() {
  auto* out = reinterpret_cast<unsigned char*>(keys_.data());
  std::size_t got = 0;
  while (got < sizeof keys_) {
    const ssize_t n = getrandom(out + got, sizeof keys_ - got, 0);
    if (n < 0) throw std::runtime_error("getrandom failed: no key for the credentials' digest");
    got += static_cast<std::size_t>(n);
  }
}

CredentialDigest CredentialHasher::digest(std::string_view user, std::string_view password) const {
  // The user's length first, so that ("a:b", "c") and ("a", "b:c") differ.
  std::string joined = std::to_string(user.size());
  joined += ':';
  joined += user;
  joined += password;
  const CredentialDigest d{siphash24(keys_[0], keys_[1], joined), siphash24(keys_[2], keys_[3], joined)};
  // The joined copy held the password: not left in freed memory.
  explicit_bzero(joined.data(), joined.size());
  return d;
}

}  // namespace gpureap
