// /metrics answers only GET and HEAD: any other method gets 405 with an Allow header, as RFC
// 9110 asks, not a 400 that reads like a malformed request.
#include <string>

#include <gtest/gtest.h>
#include <httplib.h>

#include "export_support.hpp"
#include "sim_harness.hpp"

namespace gpureap::test {
namespace {

TEST(ExportMethods, OtherMethodsThanGetAndHeadAre405WithAllow) {
  SimHost host;
  ExportServer server(host, {"--no-kernel-log"});
  ASSERT_TRUE(server.serving()) << server.stderr_text();
  auto client = server.client();
  const auto post = client.Post("/metrics", "x=1", "application/x-www-form-urlencoded");
  ASSERT_TRUE(post) << httplib::to_string(post.error());
  EXPECT_EQ(post->status, 405) << post->body;
  EXPECT_EQ(post->get_header_value("Allow"), "GET, HEAD");
  const auto empty_post = client.Post("/metrics");
  ASSERT_TRUE(empty_post);
  EXPECT_EQ(empty_post->status, 405);
  const auto del = client.Delete("/metrics");
  ASSERT_TRUE(del);
  EXPECT_EQ(del->status, 405);
  EXPECT_EQ(del->get_header_value("Allow"), "GET, HEAD");
  const auto head = client.Head("/metrics");
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 200);
  EXPECT_EQ(server.stop(), 0);
}

}  // namespace
}  // namespace gpureap::test
