// Whether the bytes a connection has sent so far hold a whole request that a worker can
// handle without waiting for the client: the head (up to its blank line) and the body the
// head announces. Read without regexes; the bytes are the client's, so anything odd refuses.
#pragma once

#include <cstddef>
#include <string_view>

namespace gpureap_http_serving {

// The most a connection may send before its request is whole (gpureap's endpoints take no
// body; a head of 16 KiB is four times what any scraper sends).
constexpr std::size_t kMaxRequestBytes = 16 * 1024;

enum class RequestArrival {
  kIncomplete,  // wait for more
  kComplete,    // a worker can read all of it at once
  kTooLarge,    // more than kMaxRequestBytes: answer 413 and close
  kRefused,     // a chunked body, a Content-Length that is not a number, a line ended by LF alone: answer 400 and close
};

RequestArrival assess_request(std::string_view received);

}  // namespace gpureap_http_serving
