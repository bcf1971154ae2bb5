// The CIFAR-10 binary reader and the synthetic generator, on files made here.
#include "cifar10.h"
#include "verify_ok.h"

#include <QFile>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>

#include <filesystem>
#include <fstream>

using namespace scalelab::trainer::cifar;
namespace fs = std::filesystem;

class TestCifar10 : public QObject {
    Q_OBJECT
private:
    QTemporaryDir m_tmp;
    std::string dir(const char *name) const { return (fs::path(m_tmp.path().toStdString()) / name).string(); }

private Q_SLOTS:
    void generatedSetReadsBack()
    {
        VERIFY_OK(writeSyntheticDataset(dir("good"), 103, 21, 7));
        const auto summary = inspectDataset(dir("good"));
        VERIFY_OK(summary);
        QCOMPARE(summary->trainImages, 103);
        QCOMPARE(summary->testImages, 21);
        QVERIFY(summary->synthetic);
        const auto train = readSplit(dir("good"), Split::Train, 0);
        VERIFY_OK(train);
        QCOMPARE(train->size(), std::size_t(103));
        QCOMPARE(train->pixels.size(), std::size_t(103) * kPixelBytes);
        for (auto label : train->labels)
            QVERIFY(label < kClasses);
        // Every file has exactly whole records.
        for (const auto &name : splitFiles(Split::Train))
            QCOMPARE(fs::file_size(fs::path(dir("good")) / name) % kRecordBytes, std::uintmax_t(0));
    }

    // The harder kind: named in the marker, reproducible, and its statistics are those of
    // its pixels (checked against a direct count).
    void shapesAndStatistics()
    {
        VERIFY_OK(writeSyntheticDataset(dir("shapes"), 50, 10, 3, SyntheticKind::Shapes));
        VERIFY_OK(writeSyntheticDataset(dir("shapes2"), 50, 10, 3, SyntheticKind::Shapes));
        QFile marker(QString::fromStdString(dir("shapes")) + QStringLiteral("/SYNTHETIC"));
        QVERIFY(marker.open(QIODevice::ReadOnly));
        QVERIFY(marker.readAll().contains("kind shapes"));
        const auto stats = measureDataset(dir("shapes"));
        VERIFY_OK(stats);
        QCOMPARE(stats->images, std::int64_t(50));
        QCOMPARE(
            stats->contentSha256, measureDataset(dir("shapes2"))->contentSha256); // same seed, same bytes
        QVERIFY(measureDataset(dir("good"))->contentSha256 != stats->contentSha256);
        const auto train = readSplit(dir("shapes"), Split::Train, 0);
        double sum = 0;
        for (std::size_t i = 0; i < train->size(); ++i)
            for (int k = 0; k < 1024; ++k)
                sum += train->pixels[i * kPixelBytes + k]; // red plane
        QVERIFY(std::abs(stats->mean[0] - sum / (50.0 * 1024) / 255.0) < 1e-12);
        QVERIFY(stats->std[0] > 0.05 && stats->std[0] < 0.5);
        QCOMPARE(parseSyntheticKind("shapes"), std::optional<SyntheticKind>(SyntheticKind::Shapes));
        QVERIFY(!parseSyntheticKind("cats"));
    }

    void limitKeepsTheFirstImages()
    {
        VERIFY_OK(writeSyntheticDataset(dir("limit"), 50, 10, 1));
        const auto all = readSplit(dir("limit"), Split::Train, 0);
        const auto some = readSplit(dir("limit"), Split::Train, 12);
        QVERIFY(all && some);
        QCOMPARE(some->size(), std::size_t(12));
        QVERIFY(std::equal(some->pixels.begin(), some->pixels.end(), all->pixels.begin()));
    }

    void sameSeedSameBytes()
    {
        VERIFY_OK(writeSyntheticDataset(dir("a"), 20, 5, 42));
        VERIFY_OK(writeSyntheticDataset(dir("b"), 20, 5, 42));
        const auto a = readSplit(dir("a"), Split::Test, 0);
        const auto b = readSplit(dir("b"), Split::Test, 0);
        QVERIFY(a && b);
        QVERIFY(a->pixels == b->pixels && a->labels == b->labels);
    }

    void officialTarballLayoutIsFound()
    {
        VERIFY_OK(writeSyntheticDataset(dir("real/cifar-10-batches-bin"), 10, 5, 1));
        const auto summary = inspectDataset(dir("real"));
        VERIFY_OK(summary);
        QCOMPARE(summary->trainImages, 10);
    }

    void truncatedFileIsRejected()
    {
        std::string error;
        VERIFY_OK(writeSyntheticDataset(dir("trunc"), 10, 5, 1));
        const auto path = fs::path(dir("trunc")) / "data_batch_3.bin";
        fs::resize_file(path, fs::file_size(path) - 100);
        error = inspectDataset(dir("trunc")).error();
        QVERIFY(!error.empty());
        QVERIFY2(error.find("data_batch_3.bin") != std::string::npos, error.c_str());
        QVERIFY2(error.find("not a whole number of 3073-byte records") != std::string::npos, error.c_str());
        error = readSplit(dir("trunc"), Split::Train, 0).error();
        QVERIFY(!error.empty());
    }

    void wrongSizedAndEmptyFilesAreRejected()
    {
        std::string error;
        VERIFY_OK(writeSyntheticDataset(dir("wrong"), 10, 5, 1));
        // 3072-byte records (no label byte), as a careless converter might write.
        std::ofstream(fs::path(dir("wrong")) / "test_batch.bin", std::ios::binary | std::ios::trunc)
            << std::string(3072 * 3, 'x');
        error = inspectDataset(dir("wrong")).error();
        QVERIFY(!error.empty());
        QVERIFY2(error.find("test_batch.bin") != std::string::npos, error.c_str());
        std::ofstream(fs::path(dir("wrong")) / "test_batch.bin", std::ios::binary | std::ios::trunc);
        error = inspectDataset(dir("wrong")).error();
        QVERIFY(!error.empty());
        QVERIFY2(error.find("0 bytes") != std::string::npos, error.c_str());
    }

    void missingFileAndFolderAreNamed()
    {
        std::string error;
        error = inspectDataset(dir("nowhere")).error();
        QVERIFY(!error.empty());
        QVERIFY2(error.find("does not exist") != std::string::npos, error.c_str());
        VERIFY_OK(writeSyntheticDataset(dir("missing"), 10, 5, 1));
        fs::remove(fs::path(dir("missing")) / "data_batch_5.bin");
        error = inspectDataset(dir("missing")).error();
        QVERIFY(!error.empty());
        QVERIFY2(error.find("missing CIFAR-10 file") != std::string::npos, error.c_str());
        QVERIFY2(error.find("data_batch_5.bin") != std::string::npos, error.c_str());
    }

    void labelOutOfRangeIsRejected()
    {
        std::string error;
        VERIFY_OK(writeSyntheticDataset(dir("label"), 10, 5, 1));
        {
            std::fstream f(
                fs::path(dir("label")) / "test_batch.bin", std::ios::in | std::ios::out | std::ios::binary);
            f.seekp(2 * kRecordBytes);
            f.put(char(17));
        }
        error = readSplit(dir("label"), Split::Test, 0).error();
        QVERIFY(!error.empty());
        QVERIFY2(error.find("record 2 has label 17") != std::string::npos, error.c_str());
    }
};

QTEST_APPLESS_MAIN(TestCifar10)
#include "tst_cifar10.moc"
