// What one instant query to the Prometheus HTTP API gave: its samples, or why there are none.
// Everything in here came from the server and may have been chosen by whoever controls a
// scraped host (label values are its process names, users, containers): it is kept as bytes
// here and sanitised only where it is shown.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace gpureap {

struct Sample {
  std::map<std::string, std::string> labels;
  double value = 0;  // may be NaN or infinite: Prometheus sends them
};

enum class QueryFailureKind {
  Unreachable,  // no connection, a failed TLS handshake or certificate check, a dropped connection
  Timeout,      // no complete answer within --timeout
  Refused,      // HTTP 401 or 403: the credentials (or their absence)
  ApiError,     // an HTTP error or `"status": "error"`: the server could not run the query
  BadAnswer,    // not the API's JSON, not an instant vector, or larger than the bound
  NoHttp,       // gpureap's HTTP module could not be loaded: a broken installation
};

struct QueryFailure {
  QueryFailureKind kind = QueryFailureKind::ApiError;
  std::string message;  // one phrase; may quote the server (unsanitised)
};

struct QueryResult {
  std::vector<Sample> samples;
  double evaluated_at = 0;            // the server's evaluation time (Unix seconds), from the samples
  std::vector<std::string> warnings;  // the API's "warnings"
  std::optional<QueryFailure> failure;
};

inline QueryResult query_failure(QueryFailureKind kind, std::string message) {
  QueryResult result;
  result.failure = QueryFailure{kind, std::move(message)};
  return result;
}

}  // namespace gpureap
