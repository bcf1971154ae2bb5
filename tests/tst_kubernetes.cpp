// packaging/kubernetes: the manifests agree with each other (Service and StatefulSet
// selectors, names, Secret names and keys, ports, probe ports, volumes, NetworkPolicy, the
// metrics port's annotations and ServiceMonitor),
// a broken one is caught, the certificate make-secrets.sh makes names the pods, and an
// agent started with the StatefulSet's own arguments serves TLS, its health port and metrics.
// No Kubernetes cluster here: what kubectl and the kubelet would do is not run (docs/deploying.md,
// "Kubernetes").
#include "test_support.h"
#include "yaml_subset.h"

#include "grpc/health/v1/health.grpc.pb.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QProcess>
#include <QRegularExpression>
#include <QTcpSocket>
#include <QTemporaryDir>
#include <QTest>

#include <grpcpp/grpcpp.h>

using namespace scalelab;
using test::YamlSubset;

namespace {

const QString kDir = QStringLiteral(SCALELAB_SOURCE_DIR "/packaging/kubernetes");

QString readAll(const QString &path)
{
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? QString::fromUtf8(f.readAll()) : QString();
}

QVariant at(const QVariant &node, const QString &path)
{
    return YamlSubset::at(node, path);
}

// Sets the value at `path` (keys and list indexes), for breaking a manifest on purpose.
void setAt(QVariant *node, const QStringList &path, const QVariant &value)
{
    if (path.isEmpty()) {
        *node = value;
        return;
    }
    bool isIndex = false;
    const int index = path.first().toInt(&isIndex);
    if (isIndex && node->typeId() == QMetaType::QVariantList) {
        QVariantList list = node->toList();
        setAt(&list[index], path.mid(1), value);
        *node = list;
    } else {
        QVariantMap map = node->toMap();
        QVariant child = map.value(path.first());
        setAt(&child, path.mid(1), value);
        map.insert(path.first(), child);
        *node = map;
    }
}

// "--key=value" arguments as a map.
QMap<QString, QString> arguments(const QVariant &args)
{
    QMap<QString, QString> out;
    for (const QVariant &a : args.toList()) {
        const QString text = a.toString();
        const qsizetype eq = text.indexOf(QLatin1Char('='));
        if (text.startsWith(QLatin1String("--")) && eq > 2)
            out.insert(text.mid(2, eq - 2), text.mid(eq + 1));
    }
    return out;
}

bool contains(const QVariantMap &labels, const QVariantMap &selector)
{
    if (selector.isEmpty())
        return false;
    for (auto it = selector.begin(); it != selector.end(); ++it)
        if (labels.value(it.key()) != it.value())
            return false;
    return true;
}

// Where `path` is mounted from in the agent container: the volume's name, or empty.
QString volumeAt(const QVariant &container, const QString &path, QString *mountPath = nullptr)
{
    QString best;
    for (const QVariant &m : at(container, QStringLiteral("volumeMounts")).toList()) {
        const QString mounted = at(m, QStringLiteral("mountPath")).toString();
        if ((path == mounted || path.startsWith(mounted + QLatin1Char('/')))
            && mounted.size() > best.size()) {
            best = mounted;
            if (mountPath)
                *mountPath = mounted;
        }
    }
    for (const QVariant &m : at(container, QStringLiteral("volumeMounts")).toList())
        if (at(m, QStringLiteral("mountPath")).toString() == best && !best.isEmpty())
            return at(m, QStringLiteral("name")).toString();
    return {};
}

using Documents = QMap<QString, QVariant>; // by kind

// The logical lines of a Dockerfile: continuations joined, comments and blank lines dropped.
QStringList dockerLines(const QString &text)
{
    QStringList lines;
    QString current;
    for (QString line : text.split(QLatin1Char('\n'))) {
        if (line.trimmed().startsWith(QLatin1Char('#')) && current.isEmpty())
            continue;
        const bool continues = line.trimmed().endsWith(QLatin1Char('\\'));
        if (continues)
            line = line.trimmed().chopped(1);
        current += line.trimmed() + QLatin1Char(' ');
        if (!continues) {
            if (!current.trimmed().isEmpty())
                lines << current.simplified();
            current.clear();
        }
    }
    return lines;
}

// What does not fit between an agent image's Dockerfile and the rest: stages copied from
// exist, SCALELAB_ options exist in CMakeLists.txt, the StatefulSet's ports are exposed and
// its user is the image's, and the last stage installs every Debian package that holds a
// library the agent links (`agentPackages`, from the built binary).
QStringList imageProblems(const QString &dockerfile, const Documents &docs, const QStringList &agentPackages,
    const QString &cmakeLists)
{
    QStringList found;
    QStringList stages;
    QStringList finalInstalls; // apt-get install arguments of the last stage
    QString user;
    QStringList exposed;
    for (const QString &line : dockerLines(dockerfile)) {
        const QString instruction = line.section(QLatin1Char(' '), 0, 0).toUpper();
        if (instruction == QLatin1String("FROM")) {
            finalInstalls.clear();
            const QStringList words = line.split(QLatin1Char(' '));
            if (words.size() >= 4 && words[2].compare(QLatin1String("AS"), Qt::CaseInsensitive) == 0)
                stages << words[3];
        } else if (instruction == QLatin1String("COPY") && line.contains(QLatin1String("--from="))) {
            const QString from = line.section(QLatin1String("--from="), 1).section(QLatin1Char(' '), 0, 0);
            if (!stages.contains(from))
                found << QStringLiteral("COPY --from=%1: no stage of that name before it").arg(from);
        } else if (instruction == QLatin1String("RUN") && line.contains(QLatin1String("apt-get install"))) {
            for (const QString &word :
                line.section(QLatin1String("apt-get install"), 1).split(QLatin1Char(' ')))
                if (word == QLatin1String("&&"))
                    break;
                else if (!word.isEmpty() && !word.startsWith(QLatin1Char('-')))
                    finalInstalls << word;
        } else if (instruction == QLatin1String("USER")) {
            user = line.section(QLatin1Char(' '), 1).section(QLatin1Char(':'), 0, 0);
        } else if (instruction == QLatin1String("EXPOSE")) {
            exposed << line.section(QLatin1Char(' '), 1).split(QLatin1Char(' '));
        }
        static const QRegularExpression option(QStringLiteral("-DSCALELAB_([A-Z_]+)="));
        for (auto it = option.globalMatch(line); it.hasNext();) {
            const QString name = QStringLiteral("SCALELAB_") + it.next().captured(1);
            if (!cmakeLists.contains(QStringLiteral("option(%1 ").arg(name)))
                found << QStringLiteral("-D%1: no such option in CMakeLists.txt").arg(name);
        }
    }
    const QVariant pod = at(docs.value(QStringLiteral("StatefulSet")), QStringLiteral("spec.template.spec"));
    const QString runAs = at(pod, QStringLiteral("securityContext.runAsUser")).toString();
    if (user != runAs)
        found << QStringLiteral("USER %1 is not the StatefulSet's runAsUser %2").arg(user, runAs);
    for (const QVariant &p : at(pod, QStringLiteral("containers.0.ports")).toList())
        if (const QString port = at(p, QStringLiteral("containerPort")).toString(); !exposed.contains(port))
            found << QStringLiteral("containerPort %1 is not EXPOSEd").arg(port);
    for (const QString &package : agentPackages)
        if (!finalInstalls.contains(package))
            found << QStringLiteral(
                "the image does not install %1, which holds a library scalelab-agent links")
                         .arg(package);
    return found;
}

// The Debian packages holding the libraries `binary` links directly, less those every
// Debian image has (libc6, libgcc-s1, libstdc++6, zlib1g).
QStringList linkedPackages(const QString &binary, QString *error)
{
    QProcess ldd;
    ldd.start(QStringLiteral("ldd"), { binary });
    QProcess readelf;
    readelf.start(QStringLiteral("readelf"), { QStringLiteral("-d"), binary });
    if (!ldd.waitForFinished() || !readelf.waitForFinished() || ldd.exitCode() != 0
        || readelf.exitCode() != 0) {
        *error = QStringLiteral("ldd/readelf failed on %1").arg(binary);
        return {};
    }
    QMap<QString, QString> paths; // soname -> path
    for (const QString &line : QString::fromUtf8(ldd.readAllStandardOutput()).split(QLatin1Char('\n')))
        if (line.contains(QLatin1String(" => /")))
            paths.insert(line.section(QLatin1String(" => "), 0, 0).trimmed(),
                line.section(QLatin1String(" => "), 1).section(QLatin1Char(' '), 0, 0));
    static const QStringList base { QStringLiteral("libc6"), QStringLiteral("libgcc-s1"),
        QStringLiteral("libstdc++6"), QStringLiteral("zlib1g") };
    QStringList packages;
    static const QRegularExpression needed(QStringLiteral("\\(NEEDED\\)\\s+Shared library: \\[([^\\]]+)\\]"));
    for (auto it = needed.globalMatch(QString::fromUtf8(readelf.readAllStandardOutput())); it.hasNext();) {
        const QString soname = it.next().captured(1);
        const QString path = paths.value(soname);
        if (path.isEmpty())
            continue; // the dynamic loader itself
        QString package;
        for (const QString &candidate :
            { path, QFileInfo(path).canonicalFilePath(), QStringLiteral("/usr") + path }) {
            QProcess dpkg;
            dpkg.start(QStringLiteral("dpkg"), { QStringLiteral("-S"), candidate });
            if (dpkg.waitForFinished() && dpkg.exitCode() == 0) {
                package = QString::fromUtf8(dpkg.readAllStandardOutput())
                              .section(QLatin1Char(':'), 0, 0)
                              .trimmed();
                break;
            }
        }
        if (package.isEmpty()) {
            *error = QStringLiteral("no Debian package holds %1 (%2)").arg(soname, path);
            return {};
        }
        if (!base.contains(package) && !packages.contains(package))
            packages << package;
    }
    return packages;
}

// Everything that does not fit together, in words.
QStringList problems(const Documents &docs)
{
    QStringList found;
    const QVariant kustomization = docs.value(QStringLiteral("Kustomization"));
    const QVariant service = docs.value(QStringLiteral("Service"));
    const QVariant set = docs.value(QStringLiteral("StatefulSet"));
    const QVariant policy = docs.value(QStringLiteral("NetworkPolicy"));
    const QVariant pod = at(set, QStringLiteral("spec.template.spec"));
    const QVariantMap podLabels = at(set, QStringLiteral("spec.template.metadata.labels")).toMap();
    const QVariant container = at(pod, QStringLiteral("containers.0"));
    const auto args = arguments(at(container, QStringLiteral("args")));

    if (at(kustomization, QStringLiteral("namespace"))
        != at(docs.value(QStringLiteral("Namespace")), QStringLiteral("metadata.name")))
        found << QStringLiteral("kustomization namespace is not the Namespace made");
    // Service <-> StatefulSet.
    if (at(service, QStringLiteral("spec.clusterIP")).toString() != QLatin1String("None"))
        found << QStringLiteral("Service is not headless (clusterIP: None)");
    if (!contains(podLabels, at(service, QStringLiteral("spec.selector")).toMap()))
        found << QStringLiteral("Service selector does not select the agent pods");
    if (!contains(podLabels, at(set, QStringLiteral("spec.selector.matchLabels")).toMap()))
        found << QStringLiteral("StatefulSet selector does not match its pod template");
    if (at(set, QStringLiteral("spec.serviceName")) != at(service, QStringLiteral("metadata.name")))
        found << QStringLiteral("StatefulSet serviceName is not the Service");
    // A scale-down by one (issue 55): the highest pod is SIGTERMed; its agent ends its ranks
    // (runs marked interrupted) within the grace period, so the ranks on the other pods see
    // their peers go at once and an elastic run goes on without it; the terminating pod
    // leaves the headless Service's DNS, so a dns: agent list drops it.
    const QVariant grace = at(pod, QStringLiteral("terminationGracePeriodSeconds"));
    if (!grace.isValid() || grace.toInt() < 5 || grace.toInt() > 60)
        found << QStringLiteral("terminationGracePeriodSeconds must be 5..60 s: a scaled-down agent's ranks "
                                "end within it, and the survivors of an elastic run go on");
    if (at(service, QStringLiteral("spec.publishNotReadyAddresses")).toString() == QLatin1String("true"))
        found << QStringLiteral("publishNotReadyAddresses keeps a terminating agent in the dns: agent list");
    // Ports.
    QMap<QString, QString> containerPorts; // name -> port
    for (const QVariant &p : at(container, QStringLiteral("ports")).toList())
        containerPorts.insert(
            at(p, QStringLiteral("name")).toString(), at(p, QStringLiteral("containerPort")).toString());
    if (containerPorts.value(QStringLiteral("grpc")) != args.value(QStringLiteral("port")))
        found << QStringLiteral("containerPort grpc is not the agent's --port");
    const QVariant servicePort = at(service, QStringLiteral("spec.ports.0"));
    if (at(servicePort, QStringLiteral("port")).toString() != args.value(QStringLiteral("port"))
        || !containerPorts.contains(at(servicePort, QStringLiteral("targetPort")).toString()))
        found << QStringLiteral("Service port does not lead to the agent's port");
    if (containerPorts.value(QStringLiteral("health")) != args.value(QStringLiteral("health-port")))
        found << QStringLiteral("containerPort health is not the agent's --health-port");
    for (const char *probe : { "readinessProbe", "livenessProbe" })
        if (at(container, QStringLiteral("%1.grpc.port").arg(QLatin1String(probe))).toString()
            != args.value(QStringLiteral("health-port")))
            found << QStringLiteral("%1 does not probe the --health-port").arg(QLatin1String(probe));
    // Prometheus: the metrics port is a container port, annotated for pod discovery, a named
    // port of the Service, and what the ServiceMonitor scrapes.
    const QString metricsPort = args.value(QStringLiteral("metrics-port"));
    if (metricsPort.isEmpty() || containerPorts.value(QStringLiteral("metrics")) != metricsPort)
        found << QStringLiteral("containerPort metrics is not the agent's --metrics-port");
    const QVariantMap annotations = at(set, QStringLiteral("spec.template.metadata.annotations")).toMap();
    if (annotations.value(QStringLiteral("prometheus.io/scrape")).toString() != QLatin1String("true")
        || annotations.value(QStringLiteral("prometheus.io/port")).toString() != metricsPort
        || annotations.value(QStringLiteral("prometheus.io/path")).toString() != QLatin1String("/metrics"))
        found << QStringLiteral(
            "the pod's prometheus.io annotations do not name the --metrics-port and /metrics");
    QMap<QString, QString> servicePorts; // name -> the container port it leads to
    for (const QVariant &p : at(service, QStringLiteral("spec.ports")).toList()) {
        const QString target = at(p, QStringLiteral("targetPort")).toString();
        servicePorts.insert(at(p, QStringLiteral("name")).toString(), containerPorts.value(target, target));
    }
    const QVariant monitor = docs.value(QStringLiteral("ServiceMonitor"));
    if (!contains(at(service, QStringLiteral("metadata.labels")).toMap(),
            at(monitor, QStringLiteral("spec.selector.matchLabels")).toMap()))
        found << QStringLiteral("ServiceMonitor selector does not select the agents' Service");
    const QVariant endpoint = at(monitor, QStringLiteral("spec.endpoints.0"));
    if (servicePorts.value(at(endpoint, QStringLiteral("port")).toString()) != metricsPort
        || at(endpoint, QStringLiteral("path")).toString() != QLatin1String("/metrics"))
        found << QStringLiteral("ServiceMonitor endpoint does not scrape the --metrics-port at /metrics");
    // Secrets: each file the agent reads is a key of a Secret the kustomization makes.
    QMap<QString, QStringList> generated; // secret -> keys
    for (const QVariant &g : at(kustomization, QStringLiteral("secretGenerator")).toList())
        for (const QVariant &f : at(g, QStringLiteral("files")).toList())
            generated[at(g, QStringLiteral("name")).toString()]
                << f.toString().section(QLatin1Char('='), 0, 0);
    QMap<QString, QVariant> volumes;
    for (const QVariant &v : at(pod, QStringLiteral("volumes")).toList())
        volumes.insert(at(v, QStringLiteral("name")).toString(), v);
    for (const char *option : { "token-file", "tls-cert", "tls-key" }) {
        const QString file = args.value(QLatin1String(option));
        QString mount;
        const QString volume = volumeAt(container, file, &mount);
        const QString secret = at(volumes.value(volume), QStringLiteral("secret.secretName")).toString();
        const QString key = file.mid(mount.size() + 1);
        if (volume.isEmpty() || !generated.value(secret).contains(key))
            found << QStringLiteral("--%1 %2 is not a key of a Secret the kustomization makes")
                         .arg(QLatin1String(option), file);
    }
    // State on the pod's own volume; /dev/shm in memory; GPUs asked for.
    QStringList claims;
    for (const QVariant &c : at(set, QStringLiteral("spec.volumeClaimTemplates")).toList())
        claims << at(c, QStringLiteral("metadata.name")).toString();
    for (const char *option : { "state-dir", "data-dir" })
        if (!claims.contains(volumeAt(container, args.value(QLatin1String(option)))))
            found << QStringLiteral("--%1 is not on the pod's volume claim").arg(QLatin1String(option));
    if (at(volumes.value(volumeAt(container, QStringLiteral("/dev/shm"))), QStringLiteral("emptyDir.medium"))
            .toString()
        != QLatin1String("Memory"))
        found << QStringLiteral("/dev/shm is not a memory-backed emptyDir");
    if (at(container, QStringLiteral("resources.limits"))
            .toMap()
            .value(QStringLiteral("nvidia.com/gpu"))
            .toString()
            .isEmpty())
        found << QStringLiteral("no nvidia.com/gpu limit");
    if (args.value(QStringLiteral("advertise-host")) != QLatin1String("$(POD_IP)"))
        found << QStringLiteral("--advertise-host is not the pod's address");
    // NetworkPolicy: applies to the agents, admits clients on the port and agents to each other.
    if (!contains(podLabels, at(policy, QStringLiteral("spec.podSelector.matchLabels")).toMap()))
        found << QStringLiteral("NetworkPolicy does not select the agent pods");
    bool clients = false, peers = false;
    for (const QVariant &rule : at(policy, QStringLiteral("spec.ingress")).toList()) {
        const QVariantMap from = at(rule, QStringLiteral("from.0.podSelector.matchLabels")).toMap();
        if (contains(podLabels, from) && at(rule, QStringLiteral("ports")).isNull())
            peers = true;
        else if (at(rule, QStringLiteral("ports.0.port")).toString() == args.value(QStringLiteral("port")))
            clients = true;
    }
    if (!clients)
        found << QStringLiteral("NetworkPolicy admits no client on the agent's port");
    bool scrapers = false;
    for (const QVariant &rule : at(policy, QStringLiteral("spec.ingress")).toList())
        if (at(rule, QStringLiteral("from.0.podSelector.matchLabels"))
                    .toMap()
                    .value(QStringLiteral("app.kubernetes.io/name"))
                == QLatin1String("prometheus")
            && at(rule, QStringLiteral("ports.0.port")).toString() == metricsPort)
            scrapers = true;
    if (!scrapers)
        found << QStringLiteral("NetworkPolicy does not let Prometheus reach the --metrics-port");
    if (!peers)
        found << QStringLiteral("NetworkPolicy does not let agents reach each other on every port");
    return found;
}

} // namespace

class TestKubernetes : public QObject {
    Q_OBJECT
private:
    Documents m_docs;
    QTemporaryDir m_tmp;

private Q_SLOTS:
    void initTestCase()
    {
        QString error;
        const QVariant kustomization
            = YamlSubset::parse(readAll(kDir + QStringLiteral("/kustomization.yaml")), &error);
        QVERIFY2(error.isEmpty(), qPrintable(error));
        m_docs.insert(QStringLiteral("Kustomization"), kustomization);
        const QStringList resources = at(kustomization, QStringLiteral("resources")).toStringList();
        QVERIFY(resources.size() >= 4);
        for (const QString &file : resources) {
            const QVariant doc = YamlSubset::parse(readAll(kDir + QLatin1Char('/') + file), &error);
            QVERIFY2(error.isEmpty() && doc.isValid(), qPrintable(file + QStringLiteral(": ") + error));
            m_docs.insert(at(doc, QStringLiteral("kind")).toString(), doc);
        }
        // Applied apart from the kustomization (it needs the Prometheus Operator's CRDs).
        const QVariant monitor
            = YamlSubset::parse(readAll(kDir + QStringLiteral("/agents-servicemonitor.yaml")), &error);
        QVERIFY2(error.isEmpty() && monitor.isValid(),
            qPrintable(QStringLiteral("agents-servicemonitor.yaml: ") + error));
        m_docs.insert(at(monitor, QStringLiteral("kind")).toString(), monitor);
        for (const char *kind : { "Namespace", "Service", "StatefulSet", "NetworkPolicy", "ServiceMonitor" })
            QVERIFY2(m_docs.contains(QLatin1String(kind)), kind);
    }

    void readerReadsTheSubset()
    {
        QString error;
        const QVariant doc
            = YamlSubset::parse(QStringLiteral("a: 1 # note\nb:\n  - x\n  - k: \"v # not a comment\"\n"
                                               "    j: {}\nc:\n  d: e\n"),
                &error);
        QVERIFY2(error.isEmpty(), qPrintable(error));
        QCOMPARE(at(doc, QStringLiteral("a")).toString(), QStringLiteral("1"));
        QCOMPARE(at(doc, QStringLiteral("b.0")).toString(), QStringLiteral("x"));
        QCOMPARE(at(doc, QStringLiteral("b.1.k")).toString(), QStringLiteral("v # not a comment"));
        QCOMPARE(at(doc, QStringLiteral("b.1.j")).toMap().size(), 0);
        QCOMPARE(at(doc, QStringLiteral("c.d")).toString(), QStringLiteral("e"));
        YamlSubset::parse(QStringLiteral("a: 1\n   b: 2\n"), &error);
        QVERIFY(!error.isEmpty());
        YamlSubset::parse(QStringLiteral("a: 1\na: 2\n"), &error);
        QVERIFY(error.contains(QLatin1String("twice")));
    }

    // Dockerfile (the .deb) and Dockerfile.cuda (built from source on PyTorch's CUDA
    // libtorch): neither can be built here (no network, no GPU); what can be checked is.
    void imagesFitTheManifests_data()
    {
        QTest::addColumn<QString>("file");
        QTest::newRow("cpu") << "Dockerfile";
        QTest::newRow("cuda") << "Dockerfile.cuda";
    }
    void imagesFitTheManifests()
    {
        QFETCH(QString, file);
        const QString dockerfile = readAll(kDir + QLatin1Char('/') + file);
        QVERIFY(!dockerfile.isEmpty());
        const QString cmakeLists = readAll(QStringLiteral(SCALELAB_SOURCE_DIR "/CMakeLists.txt"));
        QStringList packages;
        if (file.endsWith(QLatin1String(".cuda"))) {
            // Built from source: the last stage must install the agent's libraries itself
            // (the CPU image gets them from the .deb's Depends, which tst_packaging checks).
            QString error;
            packages = linkedPackages(test::binary("scalelab-agent"), &error);
            QVERIFY2(error.isEmpty(), qPrintable(error));
            QVERIFY2(packages.contains(QStringLiteral("libqt6core6"))
                    && packages.contains(QStringLiteral("libgrpc++1.51")),
                qPrintable(packages.join(' ')));
            QVERIFY(dockerfile.contains(QLatin1String("ENTRYPOINT [\"/opt/scalelab/bin/scalelab-agent\"]")));
            QVERIFY(dockerfile.contains(QLatin1String("-DCMAKE_INSTALL_PREFIX=/opt/scalelab")));
            QVERIFY(dockerfile.contains(QLatin1String("--component agent")));
            QVERIFY(QFileInfo::exists(kDir + QStringLiteral("/Dockerfile.cuda.dockerignore")));
        }
        const QStringList problems = imageProblems(dockerfile, m_docs, packages, cmakeLists);
        QVERIFY2(problems.isEmpty(), qPrintable(problems.join('\n')));

        // Each kind of mistake is caught.
        const auto broken = [&](const QString &from, const QString &to) {
            QString changed = dockerfile;
            changed.replace(from, to);
            return imageProblems(changed, m_docs, packages, cmakeLists).join('\n');
        };
        QVERIFY(broken(QStringLiteral("USER 10001"), QStringLiteral("USER 10002"))
                    .contains(QLatin1String("runAsUser")));
        QVERIFY(broken(QStringLiteral("EXPOSE 7450 7451 7452"), QStringLiteral("EXPOSE 7450 7452"))
                    .contains(QLatin1String("7451")));
        QVERIFY(broken(QStringLiteral("EXPOSE 7450 7451 7452"), QStringLiteral("EXPOSE 7450 7451"))
                    .contains(QLatin1String("7452")));
        if (!packages.isEmpty()) {
            QVERIFY(broken(QStringLiteral("--from=build"), QStringLiteral("--from=builder"))
                        .contains(QLatin1String("no stage")));
            QVERIFY(broken(QStringLiteral("-DSCALELAB_CUDA=ON"), QStringLiteral("-DSCALELAB_GPU=ON"))
                        .contains(QLatin1String("SCALELAB_GPU")));
            QVERIFY(broken(QStringLiteral(" libgrpc++1.51 "), QStringLiteral(" "))
                        .contains(QLatin1String("libgrpc++1.51")));
        }
    }

    void manifestsAgree()
    {
        const QStringList found = problems(m_docs);
        QVERIFY2(found.isEmpty(), qPrintable(found.join('\n')));
    }

    void brokenManifestsAreCaught_data()
    {
        QTest::addColumn<QString>("kind");
        QTest::addColumn<QString>("path");
        QTest::addColumn<QString>("value");
        QTest::addColumn<QString>("problem");
        QTest::newRow("service selector") << "Service"
                                          << "spec.selector.app.kubernetes.io/name"
                                          << "other"
                                          << "Service selector";
        QTest::newRow("service name") << "StatefulSet"
                                      << "spec.serviceName"
                                      << "agents"
                                      << "serviceName";
        QTest::newRow("secret name") << "StatefulSet"
                                     << "spec.template.spec.volumes.0.secret.secretName"
                                     << "scalelab-tokens"
                                     << "--token-file";
        QTest::newRow("probe port") << "StatefulSet"
                                    << "spec.template.spec.containers.0.readinessProbe.grpc.port"
                                    << "7450"
                                    << "readinessProbe";
        QTest::newRow("agent port") << "StatefulSet"
                                    << "spec.template.spec.containers.0.args.1"
                                    << "--port=7460"
                                    << "containerPort grpc";
        QTest::newRow("state volume") << "StatefulSet"
                                      << "spec.volumeClaimTemplates.0.metadata.name"
                                      << "data"
                                      << "--state-dir";
        QTest::newRow("policy port") << "NetworkPolicy"
                                     << "spec.ingress.0.ports.0.port"
                                     << "7451"
                                     << "admits no client";
        QTest::newRow("headless") << "Service"
                                  << "spec.clusterIP"
                                  << "10.0.0.1"
                                  << "headless";
        QTest::newRow("scale-down grace") << "StatefulSet"
                                          << "spec.template.spec.terminationGracePeriodSeconds"
                                          << "600"
                                          << "terminationGracePeriodSeconds";
        QTest::newRow("scrape annotation") << "StatefulSet"
                                           << "spec.template.metadata.annotations.prometheus.io/port"
                                           << "7450"
                                           << "prometheus.io annotations";
        QTest::newRow("monitor port") << "ServiceMonitor"
                                      << "spec.endpoints.0.port"
                                      << "grpc"
                                      << "ServiceMonitor endpoint";
        QTest::newRow("monitor selector") << "ServiceMonitor"
                                          << "spec.selector.matchLabels.app.kubernetes.io/name"
                                          << "other"
                                          << "ServiceMonitor selector";
        QTest::newRow("scraper port") << "NetworkPolicy"
                                      << "spec.ingress.2.ports.0.port"
                                      << "7450"
                                      << "Prometheus reach";
    }
    void brokenManifestsAreCaught()
    {
        QFETCH(QString, kind);
        QFETCH(QString, path);
        QFETCH(QString, value);
        QFETCH(QString, problem);
        Documents broken = m_docs;
        // Label keys hold dots: "app.kubernetes.io/name" is one key.
        QStringList parts = path.split(QLatin1Char('.'));
        qsizetype label = parts.indexOf(QStringLiteral("app"));
        if (label < 0)
            label = parts.indexOf(QStringLiteral("prometheus"));
        if (label >= 0)
            parts = parts.mid(0, label) + QStringList { parts.mid(label).join(QLatin1Char('.')) };
        setAt(&broken[kind], parts, value);
        const QStringList found = problems(broken);
        QVERIFY2(found.join(QLatin1Char('\n')).contains(problem), qPrintable(found.join(QLatin1Char('\n'))));
    }

    // make-secrets.sh's certificate names every pod of the StatefulSet behind the Service;
    // an agent started with the StatefulSet's own arguments (paths moved here) serves TLS
    // to a client checking that name, and SERVING on the probes' plaintext port.
    void agentRunsWithTheManifestArguments()
    {
        const QString secrets = m_tmp.filePath(QStringLiteral("secrets"));
        QProcess make;
        make.setProcessChannelMode(QProcess::MergedChannels);
        make.start(QStringLiteral("bash"),
            { kDir + QStringLiteral("/make-secrets.sh"), QStringLiteral("scalelab"), secrets });
        QVERIFY(make.waitForFinished(60'000));
        QVERIFY2(make.exitCode() == 0, make.readAll().constData());
        const QString set
            = at(m_docs.value(QStringLiteral("StatefulSet")), QStringLiteral("metadata.name")).toString();
        const QString service
            = at(m_docs.value(QStringLiteral("Service")), QStringLiteral("metadata.name")).toString();
        const QString pod0 = QStringLiteral("%1-0.%2").arg(set, service);
        for (const QString &name : { pod0, pod0 + QStringLiteral(".scalelab.svc.cluster.local"), service }) {
            QProcess verify;
            verify.setProcessChannelMode(QProcess::MergedChannels);
            verify.start(QStringLiteral("openssl"),
                { QStringLiteral("verify"), QStringLiteral("-CAfile"), secrets + QStringLiteral("/ca.crt"),
                    QStringLiteral("-verify_hostname"), name, secrets + QStringLiteral("/tls.crt") });
            QVERIFY(verify.waitForFinished(20'000));
            QVERIFY2(verify.exitCode() == 0, qPrintable(name + QStringLiteral(": ") + verify.readAll()));
        }

        const int port = test::freePort();
        const int healthPort = test::freePort();
        const int metricsPort = test::freePort();
        QVERIFY(port > 0 && healthPort > 0 && metricsPort > 0 && port != healthPort && metricsPort != port
            && metricsPort != healthPort);
        QStringList args;
        const QVariant container = at(
            m_docs.value(QStringLiteral("StatefulSet")), QStringLiteral("spec.template.spec.containers.0"));
        for (const QVariant &a : at(container, QStringLiteral("args")).toList()) {
            QString arg = a.toString();
            arg.replace(QStringLiteral("--port=7450"), QStringLiteral("--port=%1").arg(port))
                .replace(
                    QStringLiteral("--health-port=7451"), QStringLiteral("--health-port=%1").arg(healthPort))
                .replace(QStringLiteral("--metrics-port=7452"),
                    QStringLiteral("--metrics-port=%1").arg(metricsPort))
                .replace(QStringLiteral("$(POD_IP)"), QStringLiteral("127.0.0.1"))
                .replace(QStringLiteral("/etc/scalelab/token/"), secrets + QLatin1Char('/'))
                .replace(QStringLiteral("/etc/scalelab/tls/"), secrets + QLatin1Char('/'))
                .replace(QStringLiteral("/var/lib/scalelab/"), m_tmp.filePath(QStringLiteral("state/")));
            args << arg;
        }
        QVERIFY(QDir().mkpath(m_tmp.filePath(QStringLiteral("state/data"))));
        QProcess agent;
        agent.setProcessChannelMode(QProcess::MergedChannels);
        agent.start(test::binary("scalelab-agent"), args);
        QVERIFY(agent.waitForStarted());
        QByteArray log;
        for (int i = 0; i < 100 && !log.contains("listening on"); ++i) {
            agent.waitForReadyRead(200);
            log += agent.readAll();
        }
        QVERIFY2(log.contains("listening on"), log.constData());

        QProcess cli;
        cli.setProcessChannelMode(QProcess::MergedChannels);
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("SCALELAB_TLS_CA"), secrets + QStringLiteral("/ca.crt"));
        env.insert(QStringLiteral("SCALELAB_TLS_SERVER_NAME"), pod0);
        cli.setProcessEnvironment(env);
        cli.start(test::binary("scalelab-cli"),
            { QStringLiteral("describe"), QStringLiteral("--agent"), QStringLiteral("127.0.0.1:%1").arg(port),
                QStringLiteral("--token-file"), secrets + QStringLiteral("/token") });
        QVERIFY(cli.waitForFinished(30'000));
        QVERIFY2(cli.exitCode() == 0, cli.readAll().constData());

        auto health = grpc::health::v1::Health::NewStub(
            grpc::CreateChannel(QStringLiteral("127.0.0.1:%1").arg(healthPort).toStdString(),
                grpc::InsecureChannelCredentials()));
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
        grpc::health::v1::HealthCheckResponse response;
        QVERIFY(health->Check(&context, {}, &response).ok());
        QCOMPARE(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);

        // The metrics port, plain HTTP on the --listen address (0.0.0.0), as Prometheus scrapes it.
        QTcpSocket scrape;
        scrape.connectToHost(QHostAddress::LocalHost, quint16(metricsPort));
        QVERIFY2(scrape.waitForConnected(10'000), qPrintable(scrape.errorString()));
        scrape.write("GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n");
        QByteArray page;
        while (scrape.waitForReadyRead(10'000))
            page += scrape.readAll();
        page += scrape.readAll();
        QVERIFY2(page.startsWith("HTTP/1.1 200") && page.contains("\nscalelab_agent_info{version=\""),
            page.left(2000).constData());
        agent.terminate();
        QVERIFY(agent.waitForFinished(15'000));
    }
};

QTEST_GUILESS_MAIN(TestKubernetes)
#include "tst_kubernetes.moc"
