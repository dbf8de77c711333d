// The Prometheus API's answers, read strictly: canned bodies as a server (or whatever answers
// in its place) may send them.
#include "fleet/api_response.hpp"

#include <cmath>

#include <gtest/gtest.h>

namespace gpureap {
namespace {

TEST(FleetApiResponse, ReadsAnInstantVector) {
  const auto result = parse_query_response(R"({"status":"success","data":{"resultType":"vector","result":[
      {"metric":{"instance":"node-a:9874","gpu":"0"},"value":[1700000000.5,"85899345920"]},
      {"metric":{"instance":"node-b:9874","gpu":"1"},"value":[1700000000.5,"NaN"]},
      {"metric":{},"value":[1700000000.5,"+Inf"]}]},"warnings":["partial data"]})",
                                           200);
  ASSERT_FALSE(result.failure) << result.failure->message;
  ASSERT_EQ(result.samples.size(), 3u);
  EXPECT_EQ(result.samples[0].labels.at("instance"), "node-a:9874");
  EXPECT_EQ(result.samples[0].value, 85899345920.0);
  EXPECT_TRUE(std::isnan(result.samples[1].value));
  EXPECT_TRUE(std::isinf(result.samples[2].value));
  EXPECT_EQ(result.evaluated_at, 1700000000.5);
  EXPECT_EQ(result.warnings, std::vector<std::string>{"partial data"});
}

TEST(FleetApiResponse, KeepsHostileLabelBytesForTheRendererToEscape) {
  const auto result = parse_query_response(
      R"({"status":"success","data":{"resultType":"vector","result":[
      {"metric":{"user":"\u001b]0;pwned\u0007\n\u202e"},"value":[1,"1"]}]}})",
      200);
  ASSERT_FALSE(result.failure);
  EXPECT_EQ(result.samples[0].labels.at("user"), "\x1b]0;pwned\x07\n\xe2\x80\xae");
}

TEST(FleetApiResponse, TheApisErrorIsAnApiErrorWithItsMessage) {
  const auto result =
      parse_query_response(R"({"status":"error","errorType":"bad_data","error":"parse error at char 3"})", 400);
  ASSERT_TRUE(result.failure);
  EXPECT_EQ(result.failure->kind, QueryFailureKind::ApiError);
  EXPECT_NE(result.failure->message.find("bad_data: parse error at char 3"), std::string::npos);
  EXPECT_NE(result.failure->message.find("400"), std::string::npos);
}

TEST(FleetApiResponse, AnHttpErrorWithoutTheApisJsonIsAnApiError) {
  const auto result = parse_query_response("<html>502 Bad Gateway</html>", 502);
  ASSERT_TRUE(result.failure);
  EXPECT_EQ(result.failure->kind, QueryFailureKind::ApiError);
  EXPECT_NE(result.failure->message.find("HTTP 502"), std::string::npos);
}

QueryFailureKind kind_of(const std::string& body) {
  const auto result = parse_query_response(body, 200);
  EXPECT_TRUE(result.failure) << body;
  return result.failure ? result.failure->kind : QueryFailureKind::Unreachable;
}

TEST(FleetApiResponse, MalformedBodiesAreABadAnswer) {
  for (const std::string body : {
           "", "<html>login</html>", "[]", "null", R"({"status":"success"})",
           R"({"status":"success","data":{"resultType":"matrix","result":[]}})",
           R"({"status":"success","data":{"resultType":"scalar","result":[1,"1"]}})",
           R"({"status":"success","data":{"resultType":"vector","result":{}}})",
           R"({"status":"success","data":{"resultType":"vector","result":[1]}})",
           R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{}}]}})",
           R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":1},"value":[1,"1"]}]}})",
           R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"12abc"]}]}})",
           R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,1]}]}})",
           R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":["1","1"]}]}})",
           R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"1e999"]}]}})",
           R"({"status":"success","data":{"resultType":"vector","result":[)",  // cut short
       }) {
    EXPECT_EQ(kind_of(body), QueryFailureKind::BadAnswer) << body;
  }
}

TEST(FleetApiResponse, NestingDeeperThanTheApiIsRefusedBeforeItIsBuilt) {
  // A million levels: a recursive reader would exhaust the stack, a DOM costs memory per level.
  const std::string deep = std::string(1'000'000, '[') + std::string(1'000'000, ']');
  const auto result = parse_query_response(deep, 200);
  ASSERT_TRUE(result.failure);
  EXPECT_EQ(result.failure->kind, QueryFailureKind::BadAnswer);
  EXPECT_NE(result.failure->message.find("nests deeper"), std::string::npos);
}

}  // namespace
}  // namespace gpureap
