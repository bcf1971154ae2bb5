#include "listen_check.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

namespace scalelab::agent {

namespace {

using Bio = std::unique_ptr<BIO, decltype(&BIO_free)>;
using Certificate = std::unique_ptr<X509, decltype(&X509_free)>;
using Key = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;

Bio memoryBio(const std::string &text)
{
    return Bio(BIO_new_mem_buf(text.data(), int(text.size())), BIO_free);
}

// OpenSSL's reason for the oldest queued error, in its words; clears the queue.
std::string opensslReason()
{
    const unsigned long code = ERR_get_error();
    ERR_clear_error();
    if (code == 0)
        return "no reason given";
    if (const char *reason = ERR_reason_error_string(code))
        return reason;
    char text[256] = {};
    ERR_error_string_n(code, text, sizeof text);
    return text;
}

// Never ask for a passphrase on a terminal: a daemon has none to give.
int noPassphrase(char *, int, int, void *)
{
    return -1;
}

std::string timeText(const ASN1_TIME *time)
{
    Bio out(BIO_new(BIO_s_mem()), BIO_free);
    ASN1_TIME_print(out.get(), time);
    char *data = nullptr;
    const long size = BIO_get_mem_data(out.get(), &data);
    return std::string(data, size > 0 ? std::size_t(size) : 0);
}

// The first certificate of a PEM bundle `what` names, when every one of them parses; else
// what is wrong with the bundle.
common::Result<Certificate> readCertificates(const std::string &pem, const std::string &what)
{
    using common::Status;
    if (pem.find("-----BEGIN CERTIFICATE-----") == std::string::npos)
        return Status::failure(what + " holds no PEM certificate (a '-----BEGIN CERTIFICATE-----' block)");
    ERR_clear_error();
    const Bio bio = memoryBio(pem);
    Certificate first(PEM_read_bio_X509(bio.get(), nullptr, noPassphrase, nullptr), X509_free);
    if (!first)
        return Status::failure(what + ": the certificate cannot be parsed (" + opensslReason() + ")");
    while (X509 *next = PEM_read_bio_X509(bio.get(), nullptr, noPassphrase, nullptr))
        X509_free(next);
    // The loop ends at the end of the text ("no start line") or at a broken block.
    const unsigned long end = ERR_peek_last_error();
    if (end != 0 && !(ERR_GET_LIB(end) == ERR_LIB_PEM && ERR_GET_REASON(end) == PEM_R_NO_START_LINE))
        return Status::failure(
            what + ": a certificate after the first cannot be parsed (" + opensslReason() + ")");
    ERR_clear_error();
    return first;
}

std::string numericAddress(const sockaddr *address, socklen_t length)
{
    char host[NI_MAXHOST] = {};
    if (::getnameinfo(address, length, host, sizeof host, nullptr, 0, NI_NUMERICHOST) != 0)
        return "?";
    return host;
}

// Success when a plain listener binds `a` (port `service`) as gRPC would; else why not.
common::Status checkBindOne(const addrinfo *a, const std::string &service)
{
    using common::Status;
    const std::string address = numericAddress(a->ai_addr, a->ai_addrlen);
    const int fd = ::socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return Status::failure("cannot open a socket for " + address + ": " + std::strerror(errno));
    const int on = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on); // as gRPC does
    int error = 0;
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 1) != 0)
        error = errno;
    ::close(fd);
    switch (error) {
    case 0:
        return Status::success();
    case EADDRINUSE:
        return Status::failure("port " + service + " of " + address
            + " is in use by another program (another scalelab-agent?): stop it, or pick another "
              "port with --port (--port 0 picks a free one)");
    case EADDRNOTAVAIL:
        return Status::failure(address
            + " is not an address of this host (address not local to this host): listen on one of "
              "its addresses (ip -brief address), on 0.0.0.0 for all of them, or on 127.0.0.1");
    case EACCES:
        return Status::failure("port " + service
            + " is a privileged port (below 1024; permission denied): run the agent with "
              "CAP_NET_BIND_SERVICE, or pick a port from 1024 up");
    default:
        return Status::failure(
            "bind() to port " + service + " of " + address + " fails: " + std::strerror(error));
    }
}

} // namespace

common::Status checkTlsKeyPair(const std::string &certPem, const std::string &certPath,
    const std::string &keyPem, const std::string &keyPath, std::string *warning)
{
    common::Result<Certificate> read = readCertificates(certPem, "--tls-cert " + certPath);
    if (!read)
        return common::Status::failure(read.error());
    const Certificate certificate = std::move(read).value();

    const std::string key = "--tls-key " + keyPath;
    if (keyPem.find("-----BEGIN ENCRYPTED PRIVATE KEY-----") != std::string::npos
        || keyPem.find("Proc-Type: 4,ENCRYPTED") != std::string::npos)
        return common::Status::failure(key
            + " is encrypted (protected by a passphrase), which gRPC cannot use: give the agent "
              "an unencrypted copy that only it can read (openssl pkey -in KEY -out KEY.plain)");
    if (keyPem.find("PRIVATE KEY-----") == std::string::npos)
        return common::Status::failure(
            key + " holds no PEM private key (a '-----BEGIN PRIVATE KEY-----' block)");
    ERR_clear_error();
    const Bio bio = memoryBio(keyPem);
    const Key privateKey(PEM_read_bio_PrivateKey(bio.get(), nullptr, noPassphrase, nullptr), EVP_PKEY_free);
    if (!privateKey)
        return common::Status::failure(key + ": the private key cannot be parsed (" + opensslReason() + ")");
    if (X509_check_private_key(certificate.get(), privateKey.get()) != 1)
        return common::Status::failure(key + " is not the private key of the certificate in --tls-cert "
            + certPath + " (OpenSSL: " + opensslReason()
            + "): the two files come from different key pairs; give the key the certificate was issued for");
    ERR_clear_error();

    if (warning) {
        if (X509_cmp_current_time(X509_get0_notAfter(certificate.get())) < 0)
            *warning = "the certificate in --tls-cert " + certPath + " expired on "
                + timeText(X509_get0_notAfter(certificate.get()))
                + ": clients will refuse it until it is renewed";
        else if (X509_cmp_current_time(X509_get0_notBefore(certificate.get())) > 0)
            *warning = "the certificate in --tls-cert " + certPath + " is valid only from "
                + timeText(X509_get0_notBefore(certificate.get()))
                + ": clients will refuse it until then (is this host's clock right?)";
    }
    return common::Status::success();
}

common::Status checkCaBundle(const std::string &pem, const std::string &path, const std::string &option)
{
    if (const common::Result<Certificate> read = readCertificates(pem, option + " " + path); !read)
        return common::Status::failure(read.error());
    return common::Status::success();
}

common::Status checkBind(const std::string &host, int port)
{
    addrinfo hints {};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    const std::string bare = host.size() > 2 && host.front() == '[' && host.back() == ']'
        ? host.substr(1, host.size() - 2)
        : host;
    const std::string service = std::to_string(port);
    addrinfo *result = nullptr;
    if (const int rc = ::getaddrinfo(bare.c_str(), service.c_str(), &hints, &result); rc != 0)
        return common::Status::failure("'" + host + "' does not resolve (" + ::gai_strerror(rc) + ")");
    common::Status bound;
    for (const addrinfo *a = result; a && bound.ok(); a = a->ai_next)
        bound = checkBindOne(a, service);
    ::freeaddrinfo(result);
    return bound;
}

} // namespace scalelab::agent
