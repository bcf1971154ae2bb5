#include "worker_channel.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <charconv>
#include <cmath>

namespace scalelab::worker {

namespace {

using google::protobuf::FieldDescriptor;

std::string formatScalar(const v1::WorkerLaunch &launch, const FieldDescriptor *field, int index)
{
    const auto *r = launch.GetReflection();
    const bool repeated = field->is_repeated();
    switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
        return std::to_string(
            repeated ? r->GetRepeatedInt32(launch, field, index) : r->GetInt32(launch, field));
    case FieldDescriptor::CPPTYPE_INT64:
        return std::to_string(
            repeated ? r->GetRepeatedInt64(launch, field, index) : r->GetInt64(launch, field));
    case FieldDescriptor::CPPTYPE_UINT32:
        return std::to_string(
            repeated ? r->GetRepeatedUInt32(launch, field, index) : r->GetUInt32(launch, field));
    case FieldDescriptor::CPPTYPE_UINT64:
        return std::to_string(
            repeated ? r->GetRepeatedUInt64(launch, field, index) : r->GetUInt64(launch, field));
    case FieldDescriptor::CPPTYPE_DOUBLE:
        return exactNumber(
            repeated ? r->GetRepeatedDouble(launch, field, index) : r->GetDouble(launch, field));
    case FieldDescriptor::CPPTYPE_FLOAT:
        return exactNumber(repeated ? r->GetRepeatedFloat(launch, field, index) : r->GetFloat(launch, field));
    case FieldDescriptor::CPPTYPE_BOOL:
        return (repeated ? r->GetRepeatedBool(launch, field, index) : r->GetBool(launch, field)) ? "on"
                                                                                                 : "off";
    case FieldDescriptor::CPPTYPE_STRING:
        return repeated ? r->GetRepeatedString(launch, field, index) : r->GetString(launch, field);
    default:
        return {}; // worker.proto has no enum or message options (tst_worker_channel checks)
    }
}

template <typename T> bool parseNumber(const std::string &text, T *out)
{
    const char *end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, *out);
    return !text.empty() && ec == std::errc() && ptr == end;
}

// Sets one value of `field` from `text`; an empty string when it fits, else why not.
std::string setScalar(v1::WorkerLaunch *launch, const FieldDescriptor *field, const std::string &text)
{
    const auto *r = launch->GetReflection();
    const bool repeated = field->is_repeated();
    const std::string option = optionName(field->name());
    switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: {
        std::int32_t v = 0;
        if (!parseNumber(text, &v))
            return option + " expects a whole number, got '" + text + "'";
        repeated ? r->AddInt32(launch, field, v) : r->SetInt32(launch, field, v);
        return {};
    }
    case FieldDescriptor::CPPTYPE_INT64: {
        std::int64_t v = 0;
        if (!parseNumber(text, &v))
            return option + " expects a whole number, got '" + text + "'";
        repeated ? r->AddInt64(launch, field, v) : r->SetInt64(launch, field, v);
        return {};
    }
    case FieldDescriptor::CPPTYPE_UINT32: {
        std::uint32_t v = 0;
        if (!parseNumber(text, &v))
            return option + " expects a whole number of 0 or more, got '" + text + "'";
        repeated ? r->AddUInt32(launch, field, v) : r->SetUInt32(launch, field, v);
        return {};
    }
    case FieldDescriptor::CPPTYPE_UINT64: {
        std::uint64_t v = 0;
        if (!parseNumber(text, &v))
            return option + " expects a whole number of 0 or more, got '" + text + "'";
        repeated ? r->AddUInt64(launch, field, v) : r->SetUInt64(launch, field, v);
        return {};
    }
    case FieldDescriptor::CPPTYPE_DOUBLE:
    case FieldDescriptor::CPPTYPE_FLOAT: {
        double v = 0;
        if (!parseNumber(text, &v))
            return option + " expects a number, got '" + text + "'";
        if (field->cpp_type() == FieldDescriptor::CPPTYPE_FLOAT)
            repeated ? r->AddFloat(launch, field, float(v)) : r->SetFloat(launch, field, float(v));
        else
            repeated ? r->AddDouble(launch, field, v) : r->SetDouble(launch, field, v);
        return {};
    }
    case FieldDescriptor::CPPTYPE_BOOL: {
        bool v = false;
        if (text == "on" || text == "true" || text == "1")
            v = true;
        else if (!(text == "off" || text == "false" || text == "0"))
            return option + " expects on or off, got '" + text + "'";
        repeated ? r->AddBool(launch, field, v) : r->SetBool(launch, field, v);
        return {};
    }
    case FieldDescriptor::CPPTYPE_STRING:
        repeated ? r->AddString(launch, field, text) : r->SetString(launch, field, text);
        return {};
    default:
        return option + " has a type the command line cannot carry";
    }
}

} // namespace

std::string exactNumber(double value)
{
    char buf[64];
    const auto result = std::to_chars(buf, buf + sizeof buf, value);
    return std::string(buf, result.ptr);
}

std::string optionName(std::string_view fieldName)
{
    std::string option = "--";
    for (char c : fieldName)
        option += c == '_' ? '-' : c;
    return option;
}

std::vector<std::string> launchArguments(const v1::WorkerLaunch &launch)
{
    std::vector<std::string> arguments = { launch.command() };
    const auto *descriptor = launch.GetDescriptor();
    const auto *reflection = launch.GetReflection();
    std::vector<const FieldDescriptor *> fields;
    for (int i = 0; i < descriptor->field_count(); ++i)
        fields.push_back(descriptor->field(i));
    std::sort(fields.begin(), fields.end(), [](auto *a, auto *b) { return a->number() < b->number(); });
    for (const auto *field : fields) {
        if (field->number() == v1::WorkerLaunch::kCommandFieldNumber)
            continue;
        if (field->is_repeated()) {
            const int n = reflection->FieldSize(launch, field);
            if (n == 0)
                continue;
            std::string joined;
            for (int i = 0; i < n; ++i)
                joined += (i ? "," : "") + formatScalar(launch, field, i);
            arguments.insert(arguments.end(), { optionName(field->name()), joined });
        } else if (reflection->HasField(launch, field)) {
            arguments.insert(arguments.end(), { optionName(field->name()), formatScalar(launch, field, 0) });
        }
    }
    return arguments;
}

common::Result<v1::WorkerLaunch> parseLaunchArguments(const std::vector<std::string> &arguments)
{
    v1::WorkerLaunch launch;
    std::size_t i = 0;
    if (i < arguments.size() && arguments[i].rfind("-", 0) != 0)
        launch.set_command(arguments[i++]);
    const auto *descriptor = launch.GetDescriptor();
    for (; i < arguments.size(); ++i) {
        const std::string &argument = arguments[i];
        if (argument.rfind("--", 0) != 0) {
            return common::Status::failure("unexpected argument '" + argument + "'");
        }
        std::string name = argument.substr(2), value;
        if (const auto eq = name.find('='); eq != std::string::npos) {
            value = name.substr(eq + 1);
            name.resize(eq);
        } else if (i + 1 < arguments.size()) {
            value = arguments[++i];
        } else {
            return common::Status::failure("option " + argument + " needs a value");
        }
        if (name.find('_') != std::string::npos) {
            return common::Status::failure(
                "unknown option --" + name + " (options are written with dashes: " + optionName(name) + ")");
        }
        std::replace(name.begin(), name.end(), '-', '_');
        const auto *field = descriptor->FindFieldByName(name);
        if (field == nullptr || field->number() == v1::WorkerLaunch::kCommandFieldNumber) {
            return common::Status::failure("unknown option " + optionName(name));
        }
        if (field->is_repeated()) {
            launch.GetReflection()->ClearField(&launch, field); // the last one given counts
            std::size_t begin = 0;
            while (true) {
                const std::size_t comma = value.find(',', begin);
                const std::string item
                    = value.substr(begin, comma == std::string::npos ? comma : comma - begin);
                if (auto problem = setScalar(&launch, field, item); !problem.empty()) {
                    return common::Status::failure(problem + " (a comma-separated list)");
                }
                if (comma == std::string::npos)
                    break;
                begin = comma + 1;
            }
        } else if (auto problem = setScalar(&launch, field, value); !problem.empty()) {
            return common::Status::failure(problem);
        }
    }
    return launch;
}

std::string eventLine(const v1::WorkerEvent &event)
{
    google::protobuf::util::JsonPrintOptions options;
    options.add_whitespace = false;
    options.always_print_primitive_fields = true;
    options.preserve_proto_field_names = true;
    std::string line;
    // Fails only for a message that is not valid UTF-8: an error's text from the system
    // could be; say so rather than lose the event.
    if (!google::protobuf::util::MessageToJsonString(event, &line, options).ok()) {
        v1::WorkerEvent safe;
        safe.mutable_warning()->set_message("an event could not be written (text that is not UTF-8)");
        line.clear();
        (void)google::protobuf::util::MessageToJsonString(safe, &line, options);
    }
    line += '\n';
    return line;
}

common::Result<v1::WorkerEvent> parseEventLine(std::string_view line)
{
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r'))
        line.remove_suffix(1);
    v1::WorkerEvent event;
    google::protobuf::util::JsonParseOptions options;
    options.ignore_unknown_fields = false;
    const auto status = google::protobuf::util::JsonStringToMessage(
        google::protobuf::StringPiece(line.data(), line.size()), &event, options);
    if (!status.ok()) {
        return common::Status::failure(std::string(status.message()));
    }
    if (event.kind_case() == v1::WorkerEvent::KIND_NOT_SET) {
        return common::Status::failure("no event in the line");
    }
    return event;
}

} // namespace scalelab::worker
