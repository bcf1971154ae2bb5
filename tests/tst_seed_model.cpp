// The seed CNN has the architecture of the study: checked by its parameter count and
// output shape. (This file includes no torch header: the trainer keeps torch inside.)
#include "seed_model.h"

#include <QTest>

class TestSeedModel : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void parameterCount()
    {
        QCOMPARE(scalelab::trainer::seedModelParameterCount(), std::int64_t(3'249'994));
        QCOMPARE(scalelab::trainer::kSeedModelParameters, std::int64_t(3'249'994));
    }
    void outputIsTenLogitsPerImage()
    {
        const auto [batch, classes] = scalelab::trainer::seedModelOutputShape(3);
        QCOMPARE(batch, std::int64_t(3));
        QCOMPARE(classes, std::int64_t(10));
    }
};

QTEST_APPLESS_MAIN(TestSeedModel)
#include "tst_seed_model.moc"
