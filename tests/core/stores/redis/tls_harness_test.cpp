// The TLS harness itself (tls_redis.hpp), checked with openssl s_client: the server's certificate
// verifies against the test CA, by name and by IP, and not against the rogue CA; with mutual TLS a
// client gets an answer only with a certificate of the test CA; extra arguments reach redis-server.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "tls_redis.hpp"

namespace floodwall::testing {
namespace {

// openssl s_client to the server's TLS port with `args` added; `input` goes to its stdin, then end of file.
RunResult s_client(const TlsRedisServer &server, const std::vector<std::string> &args, std::string_view input = {}) {
  std::vector<std::string> argv = {
      "openssl", "s_client", "-connect", "127.0.0.1:" + std::to_string(server.tls_port()), "-servername", "localhost"};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_program(argv, input, 10.0);
}

// PING then QUIT through s_client; -quiet implies -ign_eof, so s_client waits for the server to close
// (after QUIT, or after refusing the handshake) instead of leaving at the end of its input, and a line
// starting with Q is sent rather than taken as s_client's own quit command.
RunResult ping_over_tls(const TlsRedisServer &server, const std::vector<std::string> &args) {
  std::vector<std::string> all = {"-quiet", "-CAfile", TlsCerts::shared().ca(), "-verify_return_error"};
  all.insert(all.end(), args.begin(), args.end());
  return s_client(server, all, "PING\r\nQUIT\r\n");
}

TEST(TlsHarness, ServerCertificateVerifiesAgainstTheTestCaOnly) {
  const TlsCerts &certs = TlsCerts::shared();
  EXPECT_EQ(&certs, &TlsCerts::shared());
  for (const auto &f : {certs.ca(), certs.server_cert(), certs.server_key(), certs.client_cert(), certs.client_key(),
                        certs.rogue_ca(), certs.rogue_client_cert(), certs.rogue_client_key()}) {
    EXPECT_TRUE(std::filesystem::is_regular_file(f)) << f;
    EXPECT_EQ(f.rfind(certs.dir() + "/", 0), 0u) << f;
  }

  TlsRedisServer server;
  EXPECT_EQ(server.url(), "rediss://127.0.0.1:" + std::to_string(server.tls_port()) + "/0");
  EXPECT_NE(server.tls_port(), server.plain_port());
  EXPECT_EQ(server.command({"PING"}), "PONG");
  EXPECT_EQ(server.command({"CONFIG", "GET", "tls-auth-clients"}), "tls-auth-clients no");

  // The chain, the name and the IP address.
  RunResult ok = s_client(server, {"-CAfile", certs.ca(), "-verify_return_error", "-verify_hostname", "localhost",
                                   "-verify_ip", "127.0.0.1"});
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find("Verify return code: 0 (ok)"), std::string::npos) << ok.output;

  // Hostname checking is in force: a name the certificate does not carry fails.
  RunResult wrong_name =
      s_client(server, {"-CAfile", certs.ca(), "-verify_return_error", "-verify_hostname", "example.com"});
  EXPECT_NE(wrong_name.exit_code, 0) << wrong_name.output;
  EXPECT_EQ(wrong_name.output.find("Verify return code: 0 (ok)"), std::string::npos) << wrong_name.output;

  // The rogue CA signed nothing the server uses. (redis-server sends the test CA along with its certificate,
  // OpenSSL completing the chain from tls-ca-cert-file, so the error is an untrusted self-signed certificate
  // in the chain, 19, rather than an unknown issuer, 20.)
  RunResult rogue = s_client(server, {"-CAfile", certs.rogue_ca(), "-verify_return_error"});
  EXPECT_NE(rogue.exit_code, 0) << rogue.output;
  EXPECT_EQ(rogue.output.find("Verify return code: 0 (ok)"), std::string::npos) << rogue.output;
  EXPECT_NE(rogue.output.find("certificate verify failed"), std::string::npos) << rogue.output;

  // Without mutual TLS a client needs no certificate.
  RunResult ping = ping_over_tls(server, {});
  EXPECT_NE(ping.output.find("+PONG"), std::string::npos) << ping.output;
}

TEST(TlsHarness, MutualTlsAnswersOnlyAClientCertificateOfTheTestCa) {
  const TlsCerts &certs = TlsCerts::shared();
  TlsRedisServer::Options options;  // (GCC warns of designated initializers that leave a member out)
  options.mutual = true;
  TlsRedisServer server(options);
  EXPECT_EQ(server.command({"CONFIG", "GET", "tls-auth-clients"}), "tls-auth-clients yes");

  RunResult with_cert = ping_over_tls(server, {"-cert", certs.client_cert(), "-key", certs.client_key()});
  EXPECT_NE(with_cert.output.find("+PONG"), std::string::npos) << with_cert.output;

  RunResult without_cert = ping_over_tls(server, {});
  EXPECT_NE(without_cert.exit_code, -1) << "s_client hung";
  EXPECT_EQ(without_cert.output.find("+PONG"), std::string::npos) << without_cert.output;

  RunResult rogue_cert = ping_over_tls(server, {"-cert", certs.rogue_client_cert(), "-key", certs.rogue_client_key()});
  EXPECT_NE(rogue_cert.exit_code, -1) << "s_client hung";
  EXPECT_EQ(rogue_cert.output.find("+PONG"), std::string::npos) << rogue_cert.output;
}

TEST(TlsHarness, ExtraArgumentsStopStartPauseResume) {
  TlsRedisServer::Options options;
  options.extra_args = {"--rename-command", "TIME", ""};
  TlsRedisServer server(options);
  EXPECT_NE(server.command({"TIME"}).find("unknown command"), std::string::npos) << server.command({"TIME"});

  server.pause();
  EXPECT_NE(command_at(server.plain_port(), {"PING"}, 0.2), "PONG");
  server.resume();
  EXPECT_EQ(server.command({"PING"}), "PONG");

  server.stop();
  EXPECT_EQ(server.command({"PING"}), "<no connection>");
  server.start();
  EXPECT_EQ(server.command({"PING"}), "PONG");
  EXPECT_NE(server.command({"TIME"}).find("unknown command"), std::string::npos);
  RunResult ping = ping_over_tls(server, {});
  EXPECT_NE(ping.output.find("+PONG"), std::string::npos) << ping.output;
}

}  // namespace
}  // namespace floodwall::testing
