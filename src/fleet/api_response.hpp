// The body of `/api/v1/query`, read strictly: an instant vector of samples, or the API's error.
// Hostile bodies are expected (a compromised server, a proxy's HTML page, a truncated answer):
// nesting deeper than the API's own shape, values that are not numbers and labels that are not
// strings are a BadAnswer, never a crash or a guess.
#pragma once

#include <string_view>

#include "fleet/query_result.hpp"

namespace gpureap {

// The API nests four levels deep; anything deeper is refused before it is built.
inline constexpr int kMaxResponseDepth = 8;

// `http_status` is the HTTP status the body came with: the API answers errors with a JSON body
// and 400, 422 or 503, which become ApiError with the server's errorType and error.
QueryResult parse_query_response(std::string_view body, int http_status);

}  // namespace gpureap
