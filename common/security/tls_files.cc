#include "common/security/tls_files.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <algorithm>

#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/config/json_config.h"
#include "common/status_macros.h"

namespace kforge {
namespace {

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using UniqueBio = std::unique_ptr<BIO, BioFree>;
using UniqueX509 = std::unique_ptr<X509, X509Free>;
using UniqueKey = std::unique_ptr<EVP_PKEY, KeyFree>;

absl::StatusOr<std::string> ReadPem(const std::string& path, absl::string_view field) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", text.status().message()));
  }
  return text;
}

// Every certificate of a PEM bundle, in order.
std::vector<UniqueX509> ReadCertificates(const std::string& pem) {
  UniqueBio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  std::vector<UniqueX509> certs;
  while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    certs.emplace_back(cert);
  }
  ERR_clear_error();  // the loop ends on "no start line"
  return certs;
}

std::string Asn1Time(const ASN1_TIME* time) {
  UniqueBio bio(BIO_new(BIO_s_mem()));
  ASN1_TIME_print(bio.get(), time);
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(size));
}

std::string SubjectOf(X509* cert) {
  UniqueBio bio(BIO_new(BIO_s_mem()));
  X509_NAME_print_ex(bio.get(), X509_get_subject_name(cert), 0, XN_FLAG_RFC2253);
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(size));
}

std::string NamesOf(X509* cert) {
  auto* names = static_cast<GENERAL_NAMES*>(
      X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  if (names == nullptr) return "";
  std::vector<std::string> out;
  for (int i = 0; i < sk_GENERAL_NAME_num(names); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(names, i);
    if (name->type == GEN_DNS) {
      const ASN1_STRING* s = name->d.dNSName;
      out.push_back(absl::StrCat("DNS:", absl::string_view(
          reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)), ASN1_STRING_length(s))));
    } else if (name->type == GEN_IPADD && name->d.iPAddress->length == 4) {
      const unsigned char* ip = name->d.iPAddress->data;
      out.push_back(absl::StrCat("IP:", ip[0], ".", ip[1], ".", ip[2], ".", ip[3]));
    }
  }
  GENERAL_NAMES_free(names);
  return absl::StrJoin(out, ", ");
}

absl::Status CheckIdentity(const v1::TlsConfig& tls, absl::string_view field, TlsSummary* out) {
  KF_ASSIGN_OR_RETURN(std::string cert_pem,
                      ReadPem(tls.cert_file(), absl::StrCat(field, ".cert_file")));
  KF_ASSIGN_OR_RETURN(std::string key_pem, ReadPem(tls.key_file(), absl::StrCat(field, ".key_file")));
  std::vector<UniqueX509> chain = ReadCertificates(cert_pem);
  if (chain.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".cert_file: ", tls.cert_file(),
                                                   " holds no PEM certificate"));
  }
  UniqueBio key_bio(BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size())));
  UniqueKey key(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  ERR_clear_error();
  if (key == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".key_file: ", tls.key_file(),
                                                   " holds no unencrypted PEM private key"));
  }
  if (X509_check_private_key(chain.front().get(), key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(absl::StrCat(field, ".key_file: ", tls.key_file(),
                                                   " is not the key of ", field, ".cert_file ",
                                                   tls.cert_file()));
  }
  X509* leaf = chain.front().get();
  out->subject = SubjectOf(leaf);
  out->names = NamesOf(leaf);
  out->not_after = Asn1Time(X509_get0_notAfter(leaf));
  out->expired = X509_cmp_current_time(X509_get0_notAfter(leaf)) < 0;
  return absl::OkStatus();
}

}  // namespace

bool VerifiesClientCertificates(const v1::TlsConfig& tls) {
  return ServesTls(tls) && DialsTls(tls) && tls.client_certs() != "none";
}

absl::StatusOr<TlsSummary> CheckTlsConfig(const v1::TlsConfig& tls, absl::string_view field) {
  const std::string& mode = tls.client_certs();
  if (mode != "none" && mode != "optional" && mode != "require") {
    return absl::InvalidArgumentError(absl::StrCat(field, ".client_certs: \"", mode,
                                                   "\" is not one of none, optional, require"));
  }
  if (tls.cert_file().empty() != tls.key_file().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".", tls.cert_file().empty() ? "cert_file" : "key_file",
                     ": is required with ", field, ".",
                     tls.cert_file().empty() ? "key_file" : "cert_file"));
  }
  if (ServesTls(tls) && mode != "none" && tls.ca_file().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ".ca_file: is required to verify client certificates (", field,
        ".client_certs \"", mode, "\"); set client_certs to \"none\" to ask for none"));
  }
  TlsSummary summary;
  if (ServesTls(tls)) KF_RETURN_IF_ERROR(CheckIdentity(tls, field, &summary));
  if (!tls.ca_file().empty()) {
    KF_ASSIGN_OR_RETURN(std::string ca_pem, ReadPem(tls.ca_file(), absl::StrCat(field, ".ca_file")));
    summary.ca_certificates = static_cast<int>(ReadCertificates(ca_pem).size());
    if (summary.ca_certificates == 0) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".ca_file: ", tls.ca_file(),
                                                     " holds no PEM certificate"));
    }
  }
  return summary;
}

std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(const v1::TlsConfig& tls) {
  if (!ServesTls(tls)) return grpc::InsecureServerCredentials();
  // 0 would make gRPC re-read the files without pause (an unset field).
  const auto interval = std::max(1u, static_cast<unsigned int>(tls.reload_interval_s()));
  const bool verify_clients = VerifiesClientCertificates(tls);
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      tls.key_file(), tls.cert_file(), verify_clients ? tls.ca_file() : "", interval);
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (verify_clients) {
    options.watch_root_certs();
    // "optional": a certificate is asked for and verified when presented;
    // users without one still connect and authenticate with a token.
    options.set_cert_request_type(tls.client_certs() == "require"
                                      ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                      : GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
  } else {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  }
  return grpc::experimental::TlsServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> MakeChannelCredentials(const v1::TlsConfig& tls) {
  if (!DialsTls(tls)) return grpc::InsecureChannelCredentials();
  // 0 would make gRPC re-read the files without pause (an unset field).
  const auto interval = std::max(1u, static_cast<unsigned int>(tls.reload_interval_s()));
  std::shared_ptr<grpc::experimental::CertificateProviderInterface> provider;
  if (tls.cert_file().empty()) {
    provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(tls.ca_file(),
                                                                                    interval);
  } else {
    provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
        tls.key_file(), tls.cert_file(), tls.ca_file(), interval);
  }
  grpc::experimental::TlsChannelCredentialsOptions options;
  options.set_certificate_provider(provider);
  options.watch_root_certs();
  if (!tls.cert_file().empty()) options.watch_identity_key_cert_pairs();
  // The chain is verified against ca_file and the name against the host
  // dialled (or server_name): gRPC's default host-name verifier.
  return grpc::experimental::TlsCredentials(options);
}

}  // namespace kforge
