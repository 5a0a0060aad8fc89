// The "decisions" of tests/vectors.json through the C ABI, exactly as the Python, Node and Ruby suites
// read them through their bindings: one client per case, the requests admitted in order, each answer's
// status, header pairs, content type and body compared byte for byte.
#include <floodwall.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

using nlohmann::json;

namespace {

json vectors() {
  std::ifstream in(FW_VECTORS_FILE);
  if (!in) throw std::runtime_error("cannot read " FW_VECTORS_FILE);
  return json::parse(in);
}

}  // namespace

TEST(VectorsDecisions, EveryLanguageAnswersTheSameRequestsTheSameWay) {
  json all = vectors();
  ASSERT_TRUE(all.contains("decisions")) << "tests/vectors.json has no \"decisions\" section";
  const json &cases = all["decisions"];
  ASSERT_GE(cases.size(), 5u);
  size_t checked = 0;
  for (const json &c : cases) {
    std::string name = c.at("name").get<std::string>();
    fw_client *fw = nullptr;
    ASSERT_EQ(fw_client_new(&fw, c.at("policy").dump().c_str()), FW_OK) << name;
    std::vector<fw_ticket> held;
    int i = 0;
    for (const json &rq : c.at("requests")) {
      SCOPED_TRACE(name + ", request " + std::to_string(i++));
      std::vector<std::pair<std::string, std::string>> pairs;
      for (const json &h : rq.value("headers", json::array())) pairs.emplace_back(h.at(0), h.at(1));
      std::vector<fw_header> headers;
      for (const auto &[n, v] : pairs) headers.push_back({n.data(), n.size(), v.data(), v.size()});
      std::string tenant = rq.value("tenant", std::string());
      std::string peer = rq.value("peer", std::string());
      std::string route = rq.value("route", std::string());
      std::string method = rq.value("method", std::string("GET"));
      fw_request r = FW_REQUEST_INIT;
      if (rq.contains("tenant")) {
        r.tenant = tenant.data();
        r.tenant_len = tenant.size();
      } else {
        r.headers = headers.data();
        r.header_count = headers.size();
        r.peer = rq.contains("peer") ? peer.data() : nullptr;
        r.peer_len = rq.contains("peer") ? peer.size() : 0;
        std::string check = rq.value("check", std::string());
        r.credential = check == "verified"   ? FW_CREDENTIAL_VERIFIED
                       : check == "rejected" ? FW_CREDENTIAL_REJECTED
                                             : FW_CREDENTIAL_UNCHECKED;
      }
      r.route = route.c_str();
      r.method = method.c_str();
      r.cost = rq.value("cost", 1u);
      fw_decision d = FW_DECISION_INIT;
      ASSERT_EQ(fw_admit(fw, &r, &d), FW_OK) << fw_error_last()->message;
      fw_response resp = FW_RESPONSE_INIT;
      ASSERT_EQ(fw_format_response(fw, &d, &resp), FW_OK);
      const json &want = rq.at("expect");
      EXPECT_EQ(resp.status, want.at("status").get<int>());
      json got_headers = json::array();
      for (size_t h = 0; h < resp.header_count; h++)
        got_headers.push_back({std::string(resp.headers[h].name, resp.headers[h].name_len),
                               std::string(resp.headers[h].value, resp.headers[h].value_len)});
      EXPECT_EQ(got_headers, want.at("headers"));
      EXPECT_EQ(std::string(resp.content_type), want.at("content_type").get<std::string>());
      EXPECT_EQ(std::string(resp.body, resp.body_len), want.at("body").get<std::string>());
      fw_response_dispose(&resp);
      if (rq.value("hold", false))
        held.push_back(d.ticket);
      else
        fw_release(fw, d.ticket);
      checked++;
    }
    for (fw_ticket t : held) fw_release(fw, t);
    fw_client_free(fw);
  }
  EXPECT_GE(checked, 20u);
}

TEST(VectorsRoutes, FwRequestRouteGivesOneSpellingForEveryFramework) {
  json all = vectors();
  ASSERT_TRUE(all.contains("routes")) << "tests/vectors.json has no \"routes\" section";
  fw_client *fw = nullptr;
  ASSERT_EQ(fw_client_new(&fw, "{}"), FW_OK);
  for (const json &c : all["routes"]) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    std::string route = c.value("route", std::string()), path = c.value("path", std::string());
    fw_request r = FW_REQUEST_INIT;
    r.tenant = "acct";
    r.tenant_len = 4;
    r.route = c.contains("route") ? route.c_str() : nullptr;
    r.path = c.contains("path") ? path.data() : nullptr;
    r.path_len = c.contains("path") ? path.size() : 0;
    fw_buf b = FW_BUF_INIT;
    ASSERT_EQ(fw_request_route(fw, &r, &b), FW_OK) << fw_error_last()->message;
    EXPECT_EQ(std::string(b.ptr ? b.ptr : "", b.size), c.at("route_family").get<std::string>());
    fw_buf_dispose(&b);
  }
  fw_client_free(fw);
}

TEST(VectorsPolicyText, FwPolicyTextReadsAPolicyByOneRuleForEveryLanguage) {
  json all = vectors();
  ASSERT_TRUE(all.contains("policy_text")) << "tests/vectors.json has no \"policy_text\" section";
  for (const json &c : all["policy_text"]) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    std::string input = c.at("input").get<std::string>();
    fw_buf b = FW_BUF_INIT;
    int rc = fw_policy_text(input.c_str(), c.value("is_path", false) ? 1 : 0, &b);
    if (c.contains("text")) {
      ASSERT_EQ(rc, FW_OK) << fw_error_last()->message;
      EXPECT_EQ(std::string(b.ptr ? b.ptr : "", b.size), c.at("text").get<std::string>());
    } else {
      ASSERT_EQ(rc, FW_EPOLICY);
      EXPECT_EQ(std::string(fw_error_last()->message), c.at("error").get<std::string>());
      EXPECT_EQ(b.ptr, nullptr);
    }
    fw_buf_dispose(&b);
  }
}
