#include "dataset_fetcher.h"

#include "cifar10.h"
#include "log.h"

#include <QCryptographicHash>
#include <QEventLoop>
#include <QFile>
#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QNetworkRequest>
#include <QUrl>

#include <zlib.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <fstream>
#include <mutex>
#include <vector>

namespace scalelab::agent {

namespace {

constexpr std::size_t kTarBlock = 512;
constexpr std::int64_t kProgressEveryBytes = 4 * 1024 * 1024;

std::string byHand(const std::filesystem::path &dataDir, const std::string &name)
{
    return " To install it by hand, download " + std::string(kCifar10Url) + " (MD5 " + kCifar10Md5
        + ") on a machine with network and unpack it into " + (dataDir / name).string()
        + " (tar -xzf cifar-10-binary.tar.gz -C " + (dataDir / name).string()
        + "), so that cifar-10-batches-bin/data_batch_1.bin is inside it.";
}

std::uint64_t octal(const char *field, std::size_t size)
{
    std::uint64_t value = 0;
    for (std::size_t i = 0; i < size && field[i]; ++i) {
        if (field[i] == ' ')
            continue;
        if (field[i] < '0' || field[i] > '7')
            break;
        value = value * 8 + std::uint64_t(field[i] - '0');
    }
    return value;
}

// A relative path whose every part is an ordinary name.
bool isSafeRelative(const std::string &path)
{
    if (path.empty() || path.front() == '/')
        return false;
    for (const auto &part : std::filesystem::path(path))
        if (part == "..")
            return false;
    return true;
}

} // namespace

common::Status unpackTarGz(const std::filesystem::path &archive, const std::filesystem::path &into,
    const std::function<bool(std::int64_t)> &progress)
{
    gzFile gz = gzopen(archive.c_str(), "rb");
    if (!gz)
        return common::Status::failure("cannot open " + archive.string());
    struct Closer {
        gzFile gz;
        ~Closer() { gzclose(gz); }
    } closer { gz };
    std::error_code ec;
    std::filesystem::create_directories(into, ec);
    if (ec)
        return common::Status::failure("cannot create " + into.string() + ": " + ec.message());
    std::array<char, kTarBlock> header {};
    std::string longName;
    std::int64_t unpacked = 0;
    std::vector<char> buffer(1 << 16);
    for (;;) {
        const int n = gzread(gz, header.data(), kTarBlock);
        if (n == 0)
            break;
        if (n != int(kTarBlock))
            return common::Status::failure(
                archive.string() + " is truncated or not a gzip-compressed tar file");
        if (std::all_of(header.begin(), header.end(), [](char c) { return c == 0; }))
            break; // end-of-archive marker
        const std::uint64_t size = octal(header.data() + 124, 12);
        const char type = header[156];
        std::string name = longName;
        longName.clear();
        if (name.empty()) {
            name.assign(header.data(), strnlen(header.data(), 100));
            if (std::memcmp(header.data() + 257, "ustar", 5) == 0 && header[345] != 0)
                name = std::string(header.data() + 345, strnlen(header.data() + 345, 155)) + "/" + name;
        }
        const std::uint64_t padded = (size + kTarBlock - 1) / kTarBlock * kTarBlock;
        std::string content;
        const bool keep = type == '0' || type == '\0' || type == 'L';
        std::ofstream out;
        if (type == '0' || type == '\0') {
            if (!isSafeRelative(name))
                return common::Status::failure(
                    archive.string() + " holds an unsafe path '" + name + "'; refusing to unpack it");
            const auto target = into / std::filesystem::path(name).lexically_normal();
            std::filesystem::create_directories(target.parent_path(), ec);
            out.open(target, std::ios::binary | std::ios::trunc);
            if (!out)
                return common::Status::failure("cannot write " + target.string());
        } else if (type == '5') {
            if (!isSafeRelative(name))
                return common::Status::failure(
                    archive.string() + " holds an unsafe path '" + name + "'; refusing to unpack it");
        } else if (type != 'L' && type != 'x' && type != 'g') {
            return common::Status::failure(
                archive.string() + " holds '" + name + "', which is not a plain file or folder; refusing it");
        }
        std::uint64_t left = padded;
        std::uint64_t data = size;
        while (left > 0) {
            const int want = int(std::min<std::uint64_t>(left, buffer.size()));
            const int got = gzread(gz, buffer.data(), unsigned(want));
            if (got != want)
                return common::Status::failure(archive.string() + " is truncated");
            const auto useful = std::size_t(std::min<std::uint64_t>(data, std::uint64_t(got)));
            if (keep && type == 'L')
                content.append(buffer.data(), useful);
            else if (keep)
                out.write(buffer.data(), std::streamsize(useful));
            data -= useful;
            left -= std::uint64_t(got);
            unpacked += got;
            if (progress && !progress(unpacked))
                return common::Status::failure("abandoned");
        }
        if (type == 'L')
            longName = content.substr(0, content.find('\0'));
        if (out.is_open()) {
            out.close();
            if (!out)
                return common::Status::failure("cannot write into " + into.string() + " (disk full?)");
        }
    }
    return common::Status::success();
}

namespace {

// What a download of the tarball into `file` came to: the bytes and their MD5, or why it
// ended early.
struct Download {
    std::string error;
    bool abandoned = false; // the client went away
    std::int64_t received = 0;
    std::string md5;
};

Download download(
    QFile &file, const std::string &partPath, const FetchSource &source, const FetchProgressFn &progress)
{
    Download result;
    QCryptographicHash md5(QCryptographicHash::Md5);
    std::int64_t total = 0, reported = -kProgressEveryBytes;
    QNetworkAccessManager network;
    QNetworkRequest request(QUrl(QString::fromStdString(source.url)));
    request.setTransferTimeout(source.stallTimeoutMs);
    request.setAttribute(QNetworkRequest::RedirectPolicyAttribute, QNetworkRequest::NoLessSafeRedirectPolicy);
    QEventLoop loop;
    QNetworkReply *reply = network.get(request);
    QObject::connect(reply, &QNetworkReply::readyRead, &loop, [&] {
        const QByteArray bytes = reply->readAll();
        md5.addData(bytes);
        if (file.write(bytes) != bytes.size()) {
            result.error = "cannot write " + partPath + ": " + file.errorString().toStdString();
            reply->abort();
        }
        result.received += bytes.size();
    });
    QObject::connect(reply, &QNetworkReply::downloadProgress, &loop, [&](qint64, qint64 bytesTotal) {
        total = std::max<std::int64_t>(bytesTotal, 0);
        if (result.received - reported < kProgressEveryBytes)
            return;
        reported = result.received;
        v1::FetchProgress p;
        p.set_phase(v1::FetchProgress::DOWNLOADING);
        p.set_bytes_done(result.received);
        p.set_bytes_total(total);
        p.set_message("downloading " + source.url);
        if (!progress(p)) {
            result.abandoned = true;
            reply->abort();
        }
    });
    QObject::connect(reply, &QNetworkReply::finished, &loop, &QEventLoop::quit);
    loop.exec();
    if (result.error.empty() && !result.abandoned && reply->error() != QNetworkReply::NoError)
        result.error = "cannot download " + source.url + ": " + reply->errorString().toStdString() + ".";
    delete reply;
    result.md5 = md5.result().toHex().toStdString();
    return result;
}

} // namespace

FetchResult fetchCifar10(const std::filesystem::path &dataDir, const std::string &name,
    const FetchSource &source, const FetchProgressFn &progress, v1::Dataset *dataset)
{
    static std::mutex fetching; // one fetch at a time: they write the same files
    std::lock_guard lock(fetching);
    const auto target = dataDir / name;
    const auto fill = [&](const trainer::cifar::DatasetSummary &summary) {
        dataset->set_name(name);
        dataset->set_format("cifar10-binary");
        dataset->set_synthetic(summary.synthetic);
        dataset->set_train_images(summary.trainImages);
        dataset->set_test_images(summary.testImages);
    };
    if (std::filesystem::exists(target)) {
        const auto summary = trainer::cifar::inspectDataset(target.string());
        if (summary) {
            fill(*summary);
            return {}; // already here
        }
        return { FetchFailure::Conflict,
            target.string() + " exists but is not a usable data set (" + summary.error()
                + "); move it away and fetch again." };
    }

    // --- download -------------------------------------------------------------
    const auto part = dataDir / (".fetch-" + name + ".tar.gz");
    QFile file(QString::fromStdString(part.string()));
    if (!file.open(QIODevice::WriteOnly | QIODevice::Truncate))
        return { FetchFailure::Local,
            "cannot write " + part.string() + ": " + file.errorString().toStdString() };
    const Download got = download(file, part.string(), source, progress);
    file.close();
    const auto discard = [&] {
        std::error_code ec;
        std::filesystem::remove(part, ec);
    };
    if (got.abandoned) {
        discard();
        return { FetchFailure::Abandoned, "the client went away; the download was abandoned." };
    }
    if (!got.error.empty()) {
        discard();
        return { FetchFailure::Network, got.error + byHand(dataDir, name) };
    }

    // --- verify ---------------------------------------------------------------
    v1::FetchProgress verifying;
    verifying.set_phase(v1::FetchProgress::VERIFYING);
    verifying.set_bytes_done(got.received);
    verifying.set_bytes_total(got.received);
    verifying.set_message("checking MD5");
    progress(verifying);
    const std::string &sum = got.md5;
    if (sum != source.md5) {
        discard();
        return { FetchFailure::Checksum,
            "the download from " + source.url + " is damaged or not the CIFAR-10 binary tarball: MD5 " + sum
                + ", expected " + source.md5 + "." + byHand(dataDir, name) };
    }

    // --- unpack into a hidden folder, then move it into place -------------------
    const auto staging = dataDir / (".fetch-" + name);
    std::error_code ec;
    std::filesystem::remove_all(staging, ec);
    std::int64_t reported = -kProgressEveryBytes;
    std::string error = unpackTarGz(part, staging, [&](std::int64_t bytes) {
        if (bytes - reported < kProgressEveryBytes)
            return true;
        reported = bytes;
        v1::FetchProgress p;
        p.set_phase(v1::FetchProgress::UNPACKING);
        p.set_bytes_done(bytes);
        p.set_message("unpacking");
        return progress(p);
    }).error();
    discard();
    if (error.empty()) {
        if (const auto summary = trainer::cifar::inspectDataset(staging.string())) {
            std::filesystem::rename(staging, target, ec);
            if (ec)
                error = "cannot move " + staging.string() + " to " + target.string() + ": " + ec.message();
            else
                fill(*summary);
        } else {
            error = "the archive from " + source.url
                + " does not hold a CIFAR-10 binary data set: " + summary.error();
        }
    }
    if (!error.empty()) {
        std::filesystem::remove_all(staging, ec);
        return { error == "abandoned" ? FetchFailure::Abandoned : FetchFailure::Local, error };
    }
    logMessage(LogLevel::Info,
        "fetched CIFAR-10 into " + target.string() + " (" + std::to_string(dataset->train_images())
            + " train, " + std::to_string(dataset->test_images()) + " test images)");
    return {};
}

} // namespace scalelab::agent
