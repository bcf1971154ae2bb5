// The CIFAR-10 binary reader and the synthetic generator, on files made here.
#include "cifar10.h"

#include <QTemporaryDir>
#include <QFile>
#include <QTest>

#include <cmath>

#include <filesystem>
#include <fstream>

using namespace scalelab::cifar;
namespace fs = std::filesystem;

class TestCifar10 : public QObject {
    Q_OBJECT
private:
    QTemporaryDir m_tmp;
    std::string dir(const char *name) const { return (fs::path(m_tmp.path().toStdString()) / name).string(); }

private Q_SLOTS:
    void generatedSetReadsBack()
    {
        std::string error;
        QVERIFY2(writeSyntheticDataset(dir("good"), 103, 21, 7, &error), error.c_str());
        const auto summary = inspectDataset(dir("good"), &error);
        QVERIFY2(summary.has_value(), error.c_str());
        QCOMPARE(summary->trainImages, 103);
        QCOMPARE(summary->testImages, 21);
        QVERIFY(summary->synthetic);
        const auto train = readSplit(dir("good"), Split::Train, 0, &error);
        QVERIFY(train.has_value());
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
        std::string error;
        QVERIFY2(writeSyntheticDataset(dir("shapes"), 50, 10, 3, &error, SyntheticKind::Shapes), error.c_str());
        QVERIFY(writeSyntheticDataset(dir("shapes2"), 50, 10, 3, &error, SyntheticKind::Shapes));
        QFile marker(QString::fromStdString(dir("shapes")) + QStringLiteral("/SYNTHETIC"));
        QVERIFY(marker.open(QIODevice::ReadOnly));
        QVERIFY(marker.readAll().contains("kind shapes"));
        const auto stats = measureDataset(dir("shapes"), &error);
        QVERIFY2(stats, error.c_str());
        QCOMPARE(stats->images, std::int64_t(50));
        QCOMPARE(stats->contentSha256, measureDataset(dir("shapes2"), &error)->contentSha256); // same seed, same bytes
        QVERIFY(measureDataset(dir("good"), &error)->contentSha256 != stats->contentSha256);
        const auto train = readSplit(dir("shapes"), Split::Train, 0, &error);
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
        std::string error;
        QVERIFY(writeSyntheticDataset(dir("limit"), 50, 10, 1, &error));
        const auto all = readSplit(dir("limit"), Split::Train, 0, &error);
        const auto some = readSplit(dir("limit"), Split::Train, 12, &error);
        QVERIFY(all && some);
        QCOMPARE(some->size(), std::size_t(12));
        QVERIFY(std::equal(some->pixels.begin(), some->pixels.end(), all->pixels.begin()));
    }

    void sameSeedSameBytes()
    {
        std::string error;
        QVERIFY(writeSyntheticDataset(dir("a"), 20, 5, 42, &error));
        QVERIFY(writeSyntheticDataset(dir("b"), 20, 5, 42, &error));
        const auto a = readSplit(dir("a"), Split::Test, 0, &error);
        const auto b = readSplit(dir("b"), Split::Test, 0, &error);
        QVERIFY(a && b);
        QVERIFY(a->pixels == b->pixels && a->labels == b->labels);
    }

    void officialTarballLayoutIsFound()
    {
        std::string error;
        QVERIFY(writeSyntheticDataset(dir("real/cifar-10-batches-bin"), 10, 5, 1, &error));
        const auto summary = inspectDataset(dir("real"), &error);
        QVERIFY2(summary.has_value(), error.c_str());
        QCOMPARE(summary->trainImages, 10);
    }

    void truncatedFileIsRejected()
    {
        std::string error;
        QVERIFY(writeSyntheticDataset(dir("trunc"), 10, 5, 1, &error));
        const auto path = fs::path(dir("trunc")) / "data_batch_3.bin";
        fs::resize_file(path, fs::file_size(path) - 100);
        QVERIFY(!inspectDataset(dir("trunc"), &error));
        QVERIFY2(error.find("data_batch_3.bin") != std::string::npos, error.c_str());
        QVERIFY2(error.find("not a whole number of 3073-byte records") != std::string::npos, error.c_str());
        QVERIFY(!readSplit(dir("trunc"), Split::Train, 0, &error));
    }

    void wrongSizedAndEmptyFilesAreRejected()
    {
        std::string error;
        QVERIFY(writeSyntheticDataset(dir("wrong"), 10, 5, 1, &error));
        // 3072-byte records (no label byte), as a careless converter might write.
        std::ofstream(fs::path(dir("wrong")) / "test_batch.bin", std::ios::binary | std::ios::trunc)
            << std::string(3072 * 3, 'x');
        QVERIFY(!inspectDataset(dir("wrong"), &error));
        QVERIFY2(error.find("test_batch.bin") != std::string::npos, error.c_str());
        std::ofstream(fs::path(dir("wrong")) / "test_batch.bin", std::ios::binary | std::ios::trunc);
        QVERIFY(!inspectDataset(dir("wrong"), &error));
        QVERIFY2(error.find("0 bytes") != std::string::npos, error.c_str());
    }

    void missingFileAndFolderAreNamed()
    {
        std::string error;
        QVERIFY(!inspectDataset(dir("nowhere"), &error));
        QVERIFY2(error.find("does not exist") != std::string::npos, error.c_str());
        QVERIFY(writeSyntheticDataset(dir("missing"), 10, 5, 1, &error));
        fs::remove(fs::path(dir("missing")) / "data_batch_5.bin");
        QVERIFY(!inspectDataset(dir("missing"), &error));
        QVERIFY2(error.find("missing CIFAR-10 file") != std::string::npos, error.c_str());
        QVERIFY2(error.find("data_batch_5.bin") != std::string::npos, error.c_str());
    }

    void labelOutOfRangeIsRejected()
    {
        std::string error;
        QVERIFY(writeSyntheticDataset(dir("label"), 10, 5, 1, &error));
        {
            std::fstream f(
                fs::path(dir("label")) / "test_batch.bin", std::ios::in | std::ios::out | std::ios::binary);
            f.seekp(2 * kRecordBytes);
            f.put(char(17));
        }
        QVERIFY(!readSplit(dir("label"), Split::Test, 0, &error));
        QVERIFY2(error.find("record 2 has label 17") != std::string::npos, error.c_str());
    }
};

QTEST_APPLESS_MAIN(TestCifar10)
#include "tst_cifar10.moc"
