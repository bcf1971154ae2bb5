// common/checkpoint_layout.h: the one definition of a run's checkpoint folders that the
// worker, the agent and the console share (names, MANIFEST, verification, pruning).
// Each side's use of it is tested where it is used (tst_trainer_resume, tst_agent_files,
// tst_study_process_recovery); this is the layout alone, on a temporary folder.
#include "checkpoint_layout.h"
#include "file_io.h"
#include "sha256.h"
#include "verify_ok.h"

#include <QCryptographicHash>
#include <QRandomGenerator>
#include <QTemporaryDir>
#include <QTest>

#include <cstring>
#include <fstream>

using namespace scalelab;
namespace fs = std::filesystem;

namespace {

const std::string kSumA(64, 'a');
const std::string kSumB(64, '0');

void write(const fs::path &file, const std::string &bytes)
{
    fs::create_directories(file.parent_path());
    std::ofstream(file, std::ios::binary) << bytes;
}

// A committed checkpoint of `epoch` under `root` holding the given files.
fs::path commit(
    const fs::path &root, int epoch, const std::vector<std::pair<std::string, std::string>> &files)
{
    const fs::path dir = root / common::checkpoint::folderName(epoch);
    std::vector<common::checkpoint::Entry> entries;
    for (const auto &[name, bytes] : files) {
        write(dir / name, bytes);
        entries.push_back({ common::Sha256::ofBytes(bytes.data(), bytes.size()), name });
    }
    if (!common::checkpoint::writeManifest(dir, entries))
        return {};
    return dir;
}

QStringList epochsIn(const std::vector<common::checkpoint::Folder> &folders)
{
    QStringList epochs;
    for (const auto &f : folders)
        epochs << QString::number(f.epoch);
    return epochs;
}

} // namespace

class TestCheckpointLayout : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void folderNamesRoundTrip()
    {
        QCOMPARE(common::checkpoint::folderName(7), std::string("epoch-0007"));
        QCOMPARE(common::checkpoint::folderName(12345), std::string("epoch-12345"));
        QCOMPARE(common::checkpoint::epochOf("epoch-0007"), std::optional<int>(7));
        QCOMPARE(common::checkpoint::epochOf("epoch-12345"), std::optional<int>(12345));
        QCOMPARE(common::checkpoint::epochOf("epoch-999999999"), std::optional<int>(999999999));
        for (const char *bad : { "epoch-", "epoch-1234567890", "epoch-12a", "epoch--1", "Epoch-0001",
                 ".tmp-epoch-0001", "epoch-0001/", "" })
            QVERIFY2(!common::checkpoint::epochOf(bad), bad);
    }

    void namesAndSums()
    {
        QVERIFY(common::checkpoint::isFileName("model.pt"));
        for (const char *bad : { "MANIFEST", ".hidden", "", "a/b", "..", "with space" })
            QVERIFY2(!common::checkpoint::isFileName(bad), bad);
        QVERIFY(!common::checkpoint::isFileName(std::string(65, 'x')));
        QVERIFY(common::checkpoint::isSha256(kSumA));
        QVERIFY(!common::checkpoint::isSha256(std::string(64, 'A'))); // lower case only
        QVERIFY(!common::checkpoint::isSha256(std::string(63, 'a')));
        QVERIFY(!common::checkpoint::isSha256(std::string(63, 'a') + "g"));
    }

    void manifestParsesWhatItFormats()
    {
        const std::vector<common::checkpoint::Entry> entries { { kSumA, "model.pt" }, { kSumB, "state.pt" } };
        const std::string text = common::checkpoint::formatManifest(entries);
        QCOMPARE(text, kSumA + "  model.pt\n" + kSumB + "  state.pt\n");
        const auto parsed = common::checkpoint::parseManifest(text);
        VERIFY_OK(parsed);
        QVERIFY(parsed.value() == entries);
        // Blank lines and other blanks between the fields are read the same.
        const auto blanks
            = common::checkpoint::parseManifest("\n" + kSumA + "\tmodel.pt\r\n\n" + kSumB + " state.pt");
        VERIFY_OK(blanks);
        QVERIFY(blanks.value() == entries);
    }

    void manifestProblemsNameTheLine_data()
    {
        QTest::addColumn<QString>("text");
        QTest::addColumn<QString>("problem");
        const QString a = QString::fromStdString(kSumA);
        QTest::newRow("empty") << ""
                               << "lists no files";
        QTest::newRow("only blanks") << "\n  \n"
                                     << "lists no files";
        QTest::newRow("no name") << a << "line 1: expected";
        QTest::newRow("three fields") << a + "  model.pt extra\n"
                                      << "line 1: expected";
        QTest::newRow("short sum") << "abc  model.pt\n"
                                   << "line 1: 'abc' is not a sha256";
        QTest::newRow("MANIFEST itself") << a + "  MANIFEST\n"
                                         << "not a checkpoint file name";
        QTest::newRow("path") << a + "  ../model.pt\n"
                              << "not a checkpoint file name";
        QTest::newRow("twice") << a + "  model.pt\n\n" + a + "  model.pt\n"
                               << "line 3: model.pt is listed twice";
    }
    void manifestProblemsNameTheLine()
    {
        QFETCH(QString, text);
        QFETCH(QString, problem);
        const auto parsed = common::checkpoint::parseManifest(text.toStdString());
        QVERIFY(!parsed);
        const QString got = QString::fromStdString(parsed.error());
        QVERIFY2(got.contains(problem), qPrintable(got));
    }

    void foldersAreInEpochOrder()
    {
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        QVERIFY(common::checkpoint::folders(root / "missing", false).empty());
        QVERIFY(!commit(root, 10000, { { "model.pt", "x" } }).empty()); // sorts after 0999 by number
        QVERIFY(!commit(root, 999, { { "model.pt", "y" } }).empty());
        fs::create_directories(root / "epoch-0005"); // never committed: no MANIFEST
        fs::create_directories(root / ".tmp-epoch-0006-42");
        write(root / "epoch-0007", "a file, not a folder");
        QCOMPARE(epochsIn(common::checkpoint::folders(root, true)), QStringList({ "999", "10000" }));
        QCOMPARE(epochsIn(common::checkpoint::folders(root, false)), QStringList({ "5", "999", "10000" }));
        QCOMPARE(common::checkpoint::folders(root, true).back().path, root / "epoch-10000");
    }

    void verifySaysWhatIsWrong()
    {
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        const fs::path dir = commit(root, 3, { { "model.pt", "weights" }, { "empty.pt", "" } });
        std::vector<common::checkpoint::Entry> entries;
        std::vector<std::uint64_t> sizes;
        VERIFY_OK(common::checkpoint::verify(dir, &entries, &sizes));
        QCOMPARE(entries.size(), std::size_t(2));
        QCOMPARE(entries[0].name, std::string("model.pt"));
        QCOMPARE(sizes, std::vector<std::uint64_t>({ 7, 0 }));

        write(dir / "model.pt", "weightz");
        QCOMPARE(common::checkpoint::verify(dir, &entries).error(),
            std::string("model.pt does not match its sha256 in MANIFEST"));
        QVERIFY(entries.empty());
        fs::remove(dir / "model.pt");
        QCOMPARE(common::checkpoint::verify(dir, &entries).error(), std::string("model.pt is missing"));
        write(dir / "MANIFEST", "garbage\n");
        QVERIFY(common::checkpoint::verify(dir, &entries).error().find("MANIFEST line 1") == 0);
        fs::remove(dir / "MANIFEST");
        QCOMPARE(
            common::checkpoint::verify(dir, &entries).error(), std::string("no MANIFEST (never committed)"));
    }

    void pruneKeepsTheNewest()
    {
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        for (int epoch : { 1, 2, 3, 4 })
            QVERIFY(!commit(root, epoch, { { "model.pt", std::to_string(epoch) } }).empty());
        fs::create_directories(root / ".upload-epoch-0009-1"); // not an epoch folder: left alone
        common::checkpoint::prune(root, 2, root / "epoch-0001");
        QCOMPARE(epochsIn(common::checkpoint::folders(root, true)), QStringList({ "1", "3", "4" }));
        common::checkpoint::prune(root, 1);
        QCOMPARE(epochsIn(common::checkpoint::folders(root, true)), QStringList({ "4" }));
        QVERIFY(fs::exists(root / ".upload-epoch-0009-1"));
    }

    // The digests in every MANIFEST: FIPS 180-4's examples, then Qt's SHA-256 on random
    // data in whole and in odd pieces, with each compression this CPU has.
    void sha256MatchesFipsAndQt()
    {
        using common::Sha256;
        const Sha256::Kernel initial = Sha256::kernel();
        qInfo("SHA extensions on this CPU: %s",
            Sha256::setKernel(Sha256::Kernel::ShaExtensions) ? "yes" : "no");
        for (const Sha256::Kernel kernel : { Sha256::Kernel::Portable, Sha256::Kernel::ShaExtensions }) {
            if (!Sha256::setKernel(kernel))
                continue;
            const std::string two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
            QCOMPARE(Sha256::ofBytes("", 0),
                std::string("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
            QCOMPARE(Sha256::ofBytes("abc", 3),
                std::string("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
            QCOMPARE(Sha256::ofBytes(two.data(), two.size()),
                std::string("248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"));
            QRandomGenerator random(7);
            for (const int size : { 1, 55, 56, 63, 64, 65, 119, 127, 128, 129, 1000, (1 << 20) + 13 }) {
                QByteArray bytes(size, Qt::Uninitialized);
                for (char &b : bytes)
                    b = char(random.bounded(256));
                const std::string expected
                    = QCryptographicHash::hash(bytes, QCryptographicHash::Sha256).toHex().toStdString();
                QCOMPARE(Sha256::ofBytes(bytes.constData(), std::size_t(size)), expected);
                Sha256 pieces;
                for (int at = 0, step = 1; at < size; at += step, step = step * 3 % 191 + 1)
                    pieces.update(bytes.constData() + at, std::size_t(std::min(step, size - at)));
                QCOMPARE(pieces.hexDigest(), expected);
            }
        }
        QVERIFY(Sha256::setKernel(initial));
    }

    // What prune and the worker's checkpoint commit remove with (POSIX calls, not
    // std::filesystem::remove_all: file_io.h says why).
    void removeTreeRemovesFoldersButNotWhatLinksPointTo()
    {
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        write(root / "tree" / "a.pt", "a");
        write(root / "tree" / "sub" / "deeper" / "b.pt", "b");
        fs::create_directories(root / "tree" / "empty");
        write(root / "outside" / "kept.pt", "kept");
        fs::create_directory_symlink(root / "outside", root / "tree" / "sub" / "link");
        fs::create_symlink(root / "nowhere", root / "tree" / "dangling");

        VERIFY_OK(common::removeTree(root / "tree"));
        QVERIFY(!fs::exists(fs::symlink_status(root / "tree")));
        QVERIFY(fs::exists(root / "outside" / "kept.pt")); // the link went, not its target

        write(root / "file.pt", "f");
        VERIFY_OK(common::removeTree(root / "file.pt"));
        QVERIFY(!fs::exists(root / "file.pt"));
        VERIFY_OK(common::removeTree(root / "never-was"));
        write(root / "file.pt", "f");
        // errors say so
        QCOMPARE(common::removeTree(root / "file.pt" / "under-a-file").error(),
            std::string(std::strerror(ENOTDIR)));
        VERIFY_OK(common::removeTree(fs::path()));
    }
};

QTEST_GUILESS_MAIN(TestCheckpointLayout)
#include "tst_checkpoint_layout.moc"
