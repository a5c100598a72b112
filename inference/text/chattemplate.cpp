#include "inference/text/chattemplate.h"

#include "inference/text/tokenizer.h"
#include "inference/text/unicode.h"
#include "inference/util/jsonlimits.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <memory>
#include <sstream>
#include <system_error>
#include <utility>

namespace vireo::text {

namespace {

// Bounds: a real template is 10-20 KB and renders a few KB for a prompt.
constexpr std::size_t kMaxSource = 512 * 1024;
constexpr std::size_t kMaxOutput = 8 * 1024 * 1024;
constexpr int kMaxDepth = 128;  // statement nesting and macro calls
constexpr int kMaxExprDepth = 600;  // parser levels (a dozen per bracket)
constexpr std::size_t kMaxItems = 1'000'000;  // any list a template builds
constexpr std::int64_t kMaxSteps = 4'000'000;
constexpr std::int64_t kMaxRange = 100'000;

struct TemplateError {
    std::string message;
};

[[noreturn]] void fail(const std::string& message)
{
    throw TemplateError{message};
}

// ------------------------------------------------------------------------------------------ values

struct Value;
using List = std::vector<Value>;
using Dict = std::vector<std::pair<std::string, Value>>;
struct Namespace {
    std::map<std::string, Value> attrs;
};
struct MacroDef;

struct Value {
    enum class K { Undefined, None, Bool, Int, Float, Str, List, Dict, Ns, Macro, Method };
    K k = K::Undefined;
    bool b = false;
    std::int64_t i = 0;
    double f = 0;
    std::string s;  // Str; Method: its name
    std::shared_ptr<List> list;
    std::shared_ptr<Dict> dict;
    std::shared_ptr<Namespace> ns;
    std::shared_ptr<const MacroDef> macro;
    std::shared_ptr<Value> self;  // Method: the value it is bound to
    bool tuple = false;  // List: a Python tuple (printed in parentheses)

    Value() = default;
    explicit Value(K kind) : k(kind) {}

    static Value none() { return Value(K::None); }
    static Value boolean(bool x)
    {
        Value v(K::Bool);
        v.b = x;
        return v;
    }
    static Value integer(std::int64_t x)
    {
        Value v(K::Int);
        v.i = x;
        return v;
    }
    static Value real(double x)
    {
        Value v(K::Float);
        v.f = x;
        return v;
    }
    // Every string and list a template makes is bounded here: doubling one in a loop must fail,
    // not exhaust memory.
    static Value str(std::string x)
    {
        if (x.size() > kMaxOutput)
            fail("the template builds a string longer than its output may be");
        Value v(K::Str);
        v.s = std::move(x);
        return v;
    }
    static Value ofList(List x)
    {
        if (x.size() > kMaxItems)
            fail("the template builds a list of more than a million items");
        Value v(K::List);
        v.list = std::make_shared<List>(std::move(x));
        return v;
    }
    static Value ofTuple(List x)
    {
        auto v = ofList(std::move(x));
        v.tuple = true;
        return v;
    }
    static Value ofDict(Dict x)
    {
        Value v(K::Dict);
        v.dict = std::make_shared<Dict>(std::move(x));
        return v;
    }
    bool isNumber() const { return k == K::Int || k == K::Float || k == K::Bool; }
    double number() const { return k == K::Float ? f : k == K::Int ? static_cast<double>(i) : b ? 1.0 : 0.0; }
    const Value* find(const std::string& key) const
    {
        if (k == K::Dict)
            for (const auto& [name, v] : *dict)
                if (name == key)
                    return &v;
        return nullptr;
    }
};

const char* kindName(const Value& v)
{
    switch (v.k) {
    case Value::K::Undefined: return "undefined";
    case Value::K::None: return "none";
    case Value::K::Bool: return "bool";
    case Value::K::Int: return "int";
    case Value::K::Float: return "float";
    case Value::K::Str: return "str";
    case Value::K::List: return "list";
    case Value::K::Dict: return "dict";
    case Value::K::Ns: return "namespace";
    case Value::K::Macro: return "macro";
    case Value::K::Method: return "method";
    }
    return "?";
}

bool truthy(const Value& v)
{
    switch (v.k) {
    case Value::K::Undefined:
    case Value::K::None: return false;
    case Value::K::Bool: return v.b;
    case Value::K::Int: return v.i != 0;
    case Value::K::Float: return v.f != 0.0;
    case Value::K::Str: return !v.s.empty();
    case Value::K::List: return !v.list->empty();
    case Value::K::Dict: return !v.dict->empty();
    default: return true;
    }
}

// Python's repr of a float: the shortest text that reads back, with ".0" on whole numbers.
std::string floatText(double x)
{
    if (std::isnan(x))
        return "nan";
    if (std::isinf(x))
        return x > 0 ? "inf" : "-inf";
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, x);
    std::string t(buf, r.ptr);
    if (t.find_first_of(".en") == std::string::npos)
        t += ".0";
    return t;
}

std::string repr(const Value& v);

// str(value), as Jinja prints it.
std::string text(const Value& v)
{
    switch (v.k) {
    case Value::K::Undefined: return "";
    case Value::K::None: return "None";
    case Value::K::Bool: return v.b ? "True" : "False";
    case Value::K::Int: return std::to_string(v.i);
    case Value::K::Float: return floatText(v.f);
    case Value::K::Str: return v.s;
    case Value::K::List:
    case Value::K::Dict: return repr(v);
    case Value::K::Ns: return "<Namespace>";
    default: fail(std::string("a ") + kindName(v) + " cannot be printed");
    }
}

std::string quote(const std::string& s)
{
    // Python's repr: single quotes unless the text holds one and no double quote.
    const char q = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
    std::string out(1, q);
    for (const char c : s) {
        if (c == q || c == '\\')
            out += '\\', out += c;
        else if (c == '\n')
            out += "\\n";
        else if (c == '\t')
            out += "\\t";
        else if (c == '\r')
            out += "\\r";
        else
            out += c;
    }
    return out + q;
}

std::string repr(const Value& v)
{
    if (v.k == Value::K::Str)
        return quote(v.s);
    if (v.k == Value::K::List) {
        std::string out = v.tuple ? "(" : "[";
        for (std::size_t i = 0; i < v.list->size(); ++i)
            out += (i ? ", " : "") + repr((*v.list)[i]);
        return out + (v.tuple ? (v.list->size() == 1 ? ",)" : ")") : "]");
    }
    if (v.k == Value::K::Dict) {
        std::string out = "{";
        for (std::size_t i = 0; i < v.dict->size(); ++i)
            out += (i ? ", " : "") + quote((*v.dict)[i].first) + ": " + repr((*v.dict)[i].second);
        return out + "}";
    }
    return text(v);
}

bool equal(const Value& a, const Value& b)
{
    if (a.isNumber() && b.isNumber())
        return a.number() == b.number();
    if (a.k != b.k)
        return (a.k == Value::K::Undefined || a.k == Value::K::None) && (b.k == Value::K::Undefined || b.k == Value::K::None) && a.k == b.k;
    switch (a.k) {
    case Value::K::Undefined:
    case Value::K::None: return true;
    case Value::K::Str: return a.s == b.s;
    case Value::K::List:
        if (a.list->size() != b.list->size())
            return false;
        for (std::size_t i = 0; i < a.list->size(); ++i)
            if (!equal((*a.list)[i], (*b.list)[i]))
                return false;
        return true;
    case Value::K::Dict:
        if (a.dict->size() != b.dict->size())
            return false;
        for (const auto& [key, value] : *a.dict) {
            const auto* other = b.find(key);
            if (!other || !equal(value, *other))
                return false;
        }
        return true;
    default: return a.ns == b.ns && a.macro == b.macro;
    }
}

int compare(const Value& a, const Value& b)
{
    if (a.isNumber() && b.isNumber())
        return a.number() < b.number() ? -1 : a.number() > b.number() ? 1 : 0;
    if (a.k == Value::K::Str && b.k == Value::K::Str)
        return a.s < b.s ? -1 : a.s > b.s ? 1 : 0;
    fail(std::string("'<' is not supported between ") + kindName(a) + " and " + kindName(b));
}

std::int64_t codepoints(const std::string& s)
{
    return static_cast<std::int64_t>(unicode::decodeUtf8(s).size());
}

Value fromJson(const nlohmann::ordered_json& j, int depth = 0)
{
    if (depth > kMaxDepth)
        fail("the context is nested too deeply");
    switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::none();
    case nlohmann::ordered_json::value_t::boolean: return Value::boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
    case nlohmann::ordered_json::value_t::number_unsigned: return Value::integer(j.get<std::int64_t>());
    case nlohmann::ordered_json::value_t::number_float: return Value::real(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value::str(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
        List l;
        for (const auto& e : j)
            l.push_back(fromJson(e, depth + 1));
        return Value::ofList(std::move(l));
    }
    case nlohmann::ordered_json::value_t::object: {
        Dict d;
        for (const auto& [key, e] : j.items())
            d.emplace_back(key, fromJson(e, depth + 1));
        return Value::ofDict(std::move(d));
    }
    default: fail("a context value of an unknown type");
    }
}

// json.dumps(x, ensure_ascii=False, indent=indent, separators=None, sort_keys=sortKeys).
void toJson(const Value& v, std::string& out, std::optional<int> indent, bool sortKeys, int level)
{
    if (level > kMaxDepth)
        fail("tojson: nested too deeply");
    const auto newline = [&](int l) {
        if (indent) {
            out += '\n';
            out.append(static_cast<std::size_t>(*indent) * static_cast<std::size_t>(l), ' ');
        }
    };
    switch (v.k) {
    case Value::K::Undefined: fail("tojson: an undefined value");
    case Value::K::None: out += "null"; return;
    case Value::K::Bool: out += v.b ? "true" : "false"; return;
    case Value::K::Int: out += std::to_string(v.i); return;
    case Value::K::Float: out += std::isfinite(v.f) ? floatText(v.f) : std::isnan(v.f) ? "NaN" : v.f > 0 ? "Infinity" : "-Infinity"; return;
    case Value::K::Str: {
        out += '"';
        for (const unsigned char c : v.s) {
            switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            case '\b': out += "\\b"; break;
            case '\f': out += "\\f"; break;
            default:
                if (c < 0x20) {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\u%04x", c);
                    out += buf;
                } else {
                    out += static_cast<char>(c);
                }
            }
        }
        out += '"';
        return;
    }
    case Value::K::List: {
        if (v.list->empty()) {
            out += "[]";
            return;
        }
        out += '[';
        for (std::size_t i = 0; i < v.list->size(); ++i) {
            if (i)
                out += indent ? "," : ", ";
            newline(level + 1);
            toJson((*v.list)[i], out, indent, sortKeys, level + 1);
        }
        newline(level);
        out += ']';
        return;
    }
    case Value::K::Dict: {
        if (v.dict->empty()) {
            out += "{}";
            return;
        }
        auto items = *v.dict;
        if (sortKeys)
            std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
        out += '{';
        for (std::size_t i = 0; i < items.size(); ++i) {
            if (i)
                out += indent ? "," : ", ";
            newline(level + 1);
            toJson(Value::str(items[i].first), out, indent, sortKeys, level + 1);
            out += ": ";
            toJson(items[i].second, out, indent, sortKeys, level + 1);
        }
        newline(level);
        out += '}';
        return;
    }
    default: fail(std::string("tojson: a ") + kindName(v) + " is not JSON");
    }
}

// ------------------------------------------------------------------------------------------ lexer

enum class Tok { Name, Str, Int, Float, Op, End };
struct Token {
    Tok type = Tok::End;
    std::string text;
    std::int64_t i = 0;
    double f = 0;
};

// The pieces of a template: text, {{ expression }}, {% statement %}, their tokens.
struct Piece {
    enum class Kind { Text, Output, Statement } kind = Kind::Text;
    std::string text;
    std::vector<Token> tokens;
};

bool isNameStart(char c)
{
    return std::isalpha(static_cast<unsigned char>(c)) || c == '_';
}
bool isNameChar(char c)
{
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

std::vector<Token> tokenize(std::string_view s)
{
    std::vector<Token> out;
    std::size_t i = 0;
    while (i < s.size()) {
        const char c = s[i];
        if (std::isspace(static_cast<unsigned char>(c))) {
            ++i;
        } else if (isNameStart(c)) {
            std::size_t j = i;
            while (j < s.size() && isNameChar(s[j]))
                ++j;
            out.push_back({Tok::Name, std::string(s.substr(i, j - i))});
            i = j;
        } else if (std::isdigit(static_cast<unsigned char>(c))) {
            std::size_t j = i;
            bool real = false;
            while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == '_'))
                ++j;
            if (j + 1 < s.size() && s[j] == '.' && std::isdigit(static_cast<unsigned char>(s[j + 1]))) {
                real = true;
                ++j;
                while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j])))
                    ++j;
            }
            std::string digits;
            for (auto k = i; k < j; ++k)
                if (s[k] != '_')
                    digits += s[k];
            Token t{real ? Tok::Float : Tok::Int, digits};
            if (real) {
                t.f = std::strtod(digits.c_str(), nullptr);
            } else {
                const auto r = std::from_chars(digits.data(), digits.data() + digits.size(), t.i);
                if (r.ec != std::errc())
                    fail("the number " + digits + " is too large");
            }
            out.push_back(t);
            i = j;
        } else if (c == '\'' || c == '"') {
            std::string value;
            std::size_t j = i + 1;
            for (; j < s.size() && s[j] != c; ++j) {
                if (s[j] == '\\' && j + 1 < s.size()) {
                    const char e = s[++j];
                    switch (e) {
                    case 'n': value += '\n'; break;
                    case 't': value += '\t'; break;
                    case 'r': value += '\r'; break;
                    case '\\': value += '\\'; break;
                    case '\'': value += '\''; break;
                    case '"': value += '"'; break;
                    case '0': value += '\0'; break;
                    default: value += '\\', value += e;
                    }
                } else {
                    value += s[j];
                }
            }
            if (j >= s.size())
                fail("a string is not closed");
            out.push_back({Tok::Str, value});
            i = j + 1;
        } else {
            static const char* const kOps[] = {"**", "//", "==", "!=", "<=", ">=", "(", ")", "[", "]", "{", "}", ".", ",", ":", "|", "~",
                "+", "-", "*", "/", "%", "<", ">", "="};
            const char* match = nullptr;
            for (const char* op : kOps)
                if (s.substr(i).rfind(op, 0) == 0) {
                    match = op;
                    break;
                }
            if (!match)
                fail(std::string("the character '") + c + "' is not part of the template language");
            out.push_back({Tok::Op, match});
            i += std::string_view(match).size();
        }
    }
    out.push_back({Tok::End, ""});
    return out;
}

bool isBlank(char c)
{
    return c == ' ' || c == '\t';
}
bool isSpace(char c)
{
    return std::isspace(static_cast<unsigned char>(c)) != 0;
}

// Splits the source as Jinja2's lexer does with trim_blocks and lstrip_blocks: a tag's "-"
// strips the whitespace beside it (the closing one consumes what follows), a block or comment
// closing without "-" or "+" consumes one newline, and a block or comment opening without "-"
// or "+" drops the spaces and tabs before it when nothing else is on its line.
std::vector<Piece> split(std::string_view src)
{
    std::vector<Piece> out;
    std::size_t pos = 0;
    bool lineStarting = true;  // the text so far ends a line (or there is none)
    for (;;) {
        std::size_t tag = std::string_view::npos;
        for (auto at = src.find('{', pos); at != std::string_view::npos && at + 1 < src.size(); at = src.find('{', at + 1))
            if (src[at + 1] == '{' || src[at + 1] == '%' || src[at + 1] == '#') {
                tag = at;
                break;
            }
        if (tag == std::string_view::npos) {
            if (pos < src.size())
                out.push_back({Piece::Kind::Text, std::string(src.substr(pos)), {}});
            break;
        }
        const char kind = src[tag + 1];
        const bool minus = tag + 2 < src.size() && src[tag + 2] == '-';
        const bool plus = tag + 2 < src.size() && src[tag + 2] == '+';
        std::string t(src.substr(pos, tag - pos));
        if (minus) {
            while (!t.empty() && isSpace(t.back()))
                t.pop_back();
        } else if (kind != '{' && !plus) {
            const auto lineAt = t.rfind('\n') == std::string::npos ? 0 : t.rfind('\n') + 1;
            const bool blanks = std::all_of(t.begin() + static_cast<std::ptrdiff_t>(lineAt), t.end(), isBlank);
            if ((lineAt > 0 || lineStarting) && blanks)
                t.erase(lineAt);
        }
        if (!t.empty())
            out.push_back({Piece::Kind::Text, std::move(t), {}});
        const std::size_t bodyStart = tag + 2 + ((minus || plus) ? 1 : 0);
        const std::string close = kind == '{' ? "}}" : kind == '%' ? "%}" : "#}";
        // The closing delimiter, outside string literals for expressions and statements.
        std::size_t end = std::string_view::npos;
        if (kind == '#') {
            end = src.find(close, bodyStart);
        } else {
            // Outside string literals and brackets, as Jinja's lexer balances them: the "}}" of
            // "{{ {'a': {'b': 1}} }}" closes the dict first.
            char inString = 0;
            int nesting = 0;
            for (std::size_t k = bodyStart; k + 1 < src.size(); ++k) {
                const char c = src[k];
                if (inString) {
                    if (c == '\\')
                        ++k;
                    else if (c == inString)
                        inString = 0;
                } else if (c == '\'' || c == '"') {
                    inString = c;
                } else if (nesting == 0 && src.compare(k, 2, close) == 0) {
                    end = k;
                    break;
                } else if (c == '{' || c == '[' || c == '(') {
                    ++nesting;
                } else if ((c == '}' || c == ']' || c == ')') && nesting > 0) {
                    --nesting;
                }
            }
        }
        if (end == std::string_view::npos)
            fail(std::string("a ") + (kind == '{' ? "{{" : kind == '%' ? "{%" : "{#") + " is not closed");
        std::size_t bodyEnd = end;
        bool closeMinus = false, closePlus = false;
        if (bodyEnd > bodyStart && src[bodyEnd - 1] == '-') {
            closeMinus = true;
            --bodyEnd;
        } else if (bodyEnd > bodyStart && src[bodyEnd - 1] == '+' && kind != '{') {
            closePlus = true;
            --bodyEnd;
        }
        const auto body = src.substr(bodyStart, bodyEnd - bodyStart);
        if (kind == '{')
            out.push_back({Piece::Kind::Output, {}, tokenize(body)});
        else if (kind == '%')
            out.push_back({Piece::Kind::Statement, {}, tokenize(body)});
        pos = end + 2;
        lineStarting = false;
        if (closeMinus) {
            while (pos < src.size() && isSpace(src[pos])) {
                lineStarting = src[pos] == '\n';
                ++pos;
            }
        } else if (!closePlus && kind != '{') {
            if (src.compare(pos, 2, "\r\n") == 0) {
                pos += 2;
                lineStarting = true;
            } else if (pos < src.size() && src[pos] == '\n') {
                ++pos;
                lineStarting = true;
            }
        }
    }
    return out;
}

// ------------------------------------------------------------------------------------------ syntax

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;
struct Node;
using Body = std::vector<std::unique_ptr<Node>>;

struct Expr {
    enum class K {
        Literal,
        Name,
        List,
        Dict,
        Attr,
        Item,
        Slice,
        Call,
        Filter,
        Test,
        Unary,
        Binary,
        Cond,
    } k;
    Value literal;
    std::string name;  // Name, Attr, Call (no), Filter, Test, Unary / Binary operator
    std::vector<ExprPtr> args;  // List items; Dict keys and values interleaved; Call / Filter / Test arguments
    std::vector<std::pair<std::string, ExprPtr>> kwargs;
    ExprPtr a, b, c;  // operands; Slice: start, stop, step (any may be null); Cond: value, test, else
    bool negated = false;  // Test: is not
    explicit Expr(K kind) : k(kind) {}
};

struct MacroDef {
    std::string name;
    std::vector<std::string> params;
    std::vector<ExprPtr> defaults;  // per parameter, null without one
    Body body;
};

struct Node {
    enum class K { Text, Output, If, For, Set, Macro, Break, Continue, Block } k;
    std::string text;  // Text; Set: target name
    std::string attr;  // Set: namespace attribute
    ExprPtr expr;  // Output, Set value, For iterable
    std::vector<std::pair<ExprPtr, Body>> branches;  // If (else: null condition)
    std::vector<std::string> targets;  // For
    ExprPtr filter;  // For ... if
    Body body, orelse;  // For, Block
    std::shared_ptr<MacroDef> macro;
    explicit Node(K kind) : k(kind) {}
};

class ExprParser {
public:
    ExprParser(const std::vector<Token>& tokens, std::size_t& pos) : t(tokens), p(pos) {}

    ExprPtr parse(int depth = 0) { return conditional(depth); }

    const Token& peek() const { return t[p]; }
    bool isOp(const char* op) const { return t[p].type == Tok::Op && t[p].text == op; }
    bool isName(const char* n) const { return t[p].type == Tok::Name && t[p].text == n; }
    void expectOp(const char* op)
    {
        if (!isOp(op))
            fail(std::string("expected '") + op + "', found '" + t[p].text + "'");
        ++p;
    }
    std::string expectName()
    {
        if (t[p].type != Tok::Name)
            fail("expected a name, found '" + t[p].text + "'");
        return t[p++].text;
    }

private:
    const std::vector<Token>& t;
    std::size_t& p;

    static void deep(int depth)
    {
        if (depth > kMaxExprDepth)
            fail("an expression is nested too deeply");
    }
    static ExprPtr make(Expr::K k) { return std::make_unique<Expr>(k); }
    static ExprPtr binary(const std::string& op, ExprPtr a, ExprPtr b)
    {
        auto e = make(Expr::K::Binary);
        e->name = op;
        e->a = std::move(a);
        e->b = std::move(b);
        return e;
    }

    ExprPtr conditional(int depth)
    {
        deep(depth);
        auto value = orExpr(depth);
        while (isName("if")) {
            ++p;
            auto e = make(Expr::K::Cond);
            e->b = orExpr(depth + 1);
            if (isName("else")) {
                ++p;
                e->c = conditional(depth + 1);
            }
            e->a = std::move(value);
            value = std::move(e);
        }
        return value;
    }
    // A left-associative run of the operators `ops` (keywords when `words`) over operands from next.
    template <typename Next>
    ExprPtr leftAssoc(std::initializer_list<const char*> ops, bool words, int depth, Next next)
    {
        auto a = next(depth + 1);
        for (;;) {
            const char* found = nullptr;
            for (const char* op : ops)
                if (words ? isName(op) : isOp(op)) {
                    found = op;
                    break;
                }
            if (!found)
                return a;
            ++p;
            a = binary(found, std::move(a), next(depth + 1));
        }
    }
    ExprPtr orExpr(int depth)
    {
        return leftAssoc({"or"}, true, depth, [this](int d) { return leftAssoc({"and"}, true, d, [this](int e) { return notExpr(e); }); });
    }
    ExprPtr notExpr(int depth)
    {
        deep(depth);
        if (isName("not")) {
            ++p;
            auto e = make(Expr::K::Unary);
            e->name = "not";
            e->a = notExpr(depth + 1);
            return e;
        }
        return compare(depth + 1);
    }
    ExprPtr compare(int depth)
    {
        auto a = arithmetic(depth + 1);
        for (;;) {
            std::string op;
            if (t[p].type == Tok::Op
                && (t[p].text == "==" || t[p].text == "!=" || t[p].text == "<" || t[p].text == ">" || t[p].text == "<="
                    || t[p].text == ">="))
                op = t[p++].text;
            else if (isName("in"))
                op = t[p++].text;
            else if (isName("not") && t[p + 1].type == Tok::Name && t[p + 1].text == "in")
                op = "not in", p += 2;
            else
                return a;
            a = binary(op, std::move(a), arithmetic(depth + 1));
        }
    }
    // + -, then ~, then * / // %, then **: Jinja's order.
    ExprPtr arithmetic(int depth)
    {
        return leftAssoc({"+", "-"}, false, depth, [this](int d) {
            return leftAssoc({"~"}, false, d, [this](int e) {
                return leftAssoc({"*", "/", "//", "%"}, false, e,
                    [this](int f) { return leftAssoc({"**"}, false, f, [this](int g) { return unary(g, true); }); });
            });
        });
    }
    ExprPtr unary(int depth, bool withFilter)
    {
        deep(depth);
        ExprPtr node;
        if (isOp("-") || isOp("+")) {
            const auto op = t[p++].text;
            node = make(Expr::K::Unary);
            node->name = op;
            node->a = unary(depth + 1, false);
        } else {
            node = postfix(primary(depth + 1), depth + 1);
        }
        return withFilter ? filters(std::move(node), depth + 1) : std::move(node);
    }
    ExprPtr primary(int depth)
    {
        deep(depth);
        const auto& tok = t[p];
        if (tok.type == Tok::Str) {
            std::string s;
            while (t[p].type == Tok::Str)  // adjacent literals join, as in Python
                s += t[p++].text;
            auto e = make(Expr::K::Literal);
            e->literal = Value::str(s);
            return e;
        }
        if (tok.type == Tok::Int || tok.type == Tok::Float) {
            ++p;
            auto e = make(Expr::K::Literal);
            e->literal = tok.type == Tok::Int ? Value::integer(tok.i) : Value::real(tok.f);
            return e;
        }
        if (tok.type == Tok::Name) {
            ++p;
            auto e = make(Expr::K::Literal);
            if (tok.text == "true" || tok.text == "True")
                e->literal = Value::boolean(true);
            else if (tok.text == "false" || tok.text == "False")
                e->literal = Value::boolean(false);
            else if (tok.text == "none" || tok.text == "None")
                e->literal = Value::none();
            else {
                e = make(Expr::K::Name);
                e->name = tok.text;
            }
            return e;
        }
        if (isOp("(")) {
            ++p;
            if (isOp(")")) {
                ++p;
                auto e = make(Expr::K::List);
                e->name = "tuple";
                return e;
            }
            auto first = parse(depth + 1);
            if (isOp(",")) {
                auto e = make(Expr::K::List);
                e->name = "tuple";
                e->args.push_back(std::move(first));
                while (isOp(",")) {
                    ++p;
                    if (isOp(")"))
                        break;
                    e->args.push_back(parse(depth + 1));
                }
                expectOp(")");
                return e;
            }
            expectOp(")");
            return first;
        }
        if (isOp("[")) {
            ++p;
            auto e = make(Expr::K::List);
            while (!isOp("]")) {
                e->args.push_back(parse(depth + 1));
                if (!isOp(","))
                    break;
                ++p;
            }
            expectOp("]");
            return e;
        }
        if (isOp("{")) {
            ++p;
            auto e = make(Expr::K::Dict);
            while (!isOp("}")) {
                e->args.push_back(parse(depth + 1));
                expectOp(":");
                e->args.push_back(parse(depth + 1));
                if (!isOp(","))
                    break;
                ++p;
            }
            expectOp("}");
            return e;
        }
        fail("unexpected '" + tok.text + "' in an expression");
    }
    void callArgs(Expr& e, int depth)
    {
        expectOp("(");
        while (!isOp(")")) {
            if (t[p].type == Tok::Name && t[p + 1].type == Tok::Op && t[p + 1].text == "=") {
                auto key = t[p].text;
                p += 2;
                e.kwargs.emplace_back(std::move(key), parse(depth + 1));
            } else {
                if (!e.kwargs.empty())
                    fail("a positional argument follows a keyword argument");
                e.args.push_back(parse(depth + 1));
            }
            if (!isOp(","))
                break;
            ++p;
        }
        expectOp(")");
    }
    ExprPtr postfix(ExprPtr node, int depth)
    {
        for (;;) {
            deep(depth);
            if (isOp(".")) {
                ++p;
                auto e = make(Expr::K::Attr);
                if (t[p].type == Tok::Int) {  // x.0, as Jinja allows
                    e = make(Expr::K::Item);
                    auto index = make(Expr::K::Literal);
                    index->literal = Value::integer(t[p++].i);
                    e->b = std::move(index);
                } else {
                    e->name = expectName();
                }
                e->a = std::move(node);
                node = std::move(e);
            } else if (isOp("[")) {
                ++p;
                ExprPtr start, stop, step;
                bool slice = false;
                if (!isOp(":"))
                    start = parse(depth + 1);
                if (isOp(":")) {
                    slice = true;
                    ++p;
                    if (!isOp("]") && !isOp(":"))
                        stop = parse(depth + 1);
                    if (isOp(":")) {
                        ++p;
                        if (!isOp("]"))
                            step = parse(depth + 1);
                    }
                }
                expectOp("]");
                auto e = make(slice ? Expr::K::Slice : Expr::K::Item);
                e->a = std::move(node);
                if (slice) {
                    e->b = std::move(start);
                    e->c = std::move(stop);
                    if (step)
                        e->args.push_back(std::move(step));
                } else {
                    e->b = std::move(start);
                }
                node = std::move(e);
            } else if (isOp("(")) {
                auto e = make(Expr::K::Call);
                e->a = std::move(node);
                callArgs(*e, depth);
                node = std::move(e);
            } else {
                return node;
            }
            ++depth;
        }
    }
    ExprPtr filters(ExprPtr node, int depth)
    {
        for (;;) {
            deep(depth++);
            if (isOp("|")) {
                ++p;
                auto e = make(Expr::K::Filter);
                e->name = expectName();
                while (isOp(".")) {  // dotted filter names
                    ++p;
                    e->name += "." + expectName();
                }
                e->a = std::move(node);
                if (isOp("("))
                    callArgs(*e, depth);
                node = std::move(e);
            } else if (isName("is")) {
                ++p;
                auto e = make(Expr::K::Test);
                if (isName("not")) {
                    ++p;
                    e->negated = true;
                }
                e->name = expectName();
                e->a = std::move(node);
                if (isOp("(")) {
                    callArgs(*e, depth);
                } else if (t[p].type == Tok::Str || t[p].type == Tok::Int || t[p].type == Tok::Float
                    || (t[p].type == Tok::Name && t[p].text != "and" && t[p].text != "or" && t[p].text != "else" && t[p].text != "if"
                        && t[p].text != "in" && t[p].text != "not" && t[p].text != "is")) {
                    e->args.push_back(primary(depth + 1));  // one bare argument: `is divisibleby 3`
                }
                node = std::move(e);
            } else if (isOp("(")) {
                auto e = make(Expr::K::Call);
                e->a = std::move(node);
                callArgs(*e, depth);
                node = std::move(e);
            } else {
                return node;
            }
        }
    }
};

// Statements into a tree; stops at the closing keywords given.
class Parser {
public:
    explicit Parser(std::vector<Piece> pieces) : m_pieces(std::move(pieces)) {}

    Body parseAll()
    {
        auto body = parseBody({}, 0);
        if (m_at < m_pieces.size())
            fail("'" + keyword(m_pieces[m_at]) + "' without its opening statement");
        return body;
    }

private:
    std::vector<Piece> m_pieces;
    std::size_t m_at = 0;

    static std::string keyword(const Piece& p) { return p.tokens.empty() || p.tokens[0].type != Tok::Name ? "" : p.tokens[0].text; }

    Body parseBody(const std::vector<std::string>& until, int depth)
    {
        if (depth > kMaxDepth)
            fail("statements are nested too deeply");
        Body body;
        while (m_at < m_pieces.size()) {
            auto& piece = m_pieces[m_at];
            if (piece.kind == Piece::Kind::Text) {
                auto n = std::make_unique<Node>(Node::K::Text);
                n->text = std::move(piece.text);
                body.push_back(std::move(n));
                ++m_at;
                continue;
            }
            std::size_t p = 0;
            ExprParser ep(piece.tokens, p);
            if (piece.kind == Piece::Kind::Output) {
                auto n = std::make_unique<Node>(Node::K::Output);
                n->expr = ep.parse();
                if (ep.peek().type != Tok::End)
                    fail("unexpected '" + ep.peek().text + "' in {{ }}");
                body.push_back(std::move(n));
                ++m_at;
                continue;
            }
            const auto word = keyword(piece);
            if (std::find(until.begin(), until.end(), word) != until.end())
                return body;
            ++m_at;
            ++p;
            auto done = [&] {
                if (ep.peek().type != Tok::End)
                    fail("unexpected '" + ep.peek().text + "' after " + word);
            };
            if (word == "if") {
                auto n = std::make_unique<Node>(Node::K::If);
                auto cond = ep.parse();
                done();
                for (;;) {
                    auto branch = parseBody({"elif", "else", "endif"}, depth + 1);
                    n->branches.emplace_back(std::move(cond), std::move(branch));
                    if (m_at >= m_pieces.size())
                        fail("an if without endif");
                    const auto next = keyword(m_pieces[m_at]);
                    std::size_t q = 1;
                    ExprParser np(m_pieces[m_at].tokens, q);
                    ++m_at;
                    if (next == "endif")
                        break;
                    if (next == "else") {
                        auto rest = parseBody({"endif"}, depth + 1);
                        n->branches.emplace_back(nullptr, std::move(rest));
                        if (m_at >= m_pieces.size())
                            fail("an if without endif");
                        ++m_at;
                        break;
                    }
                    cond = np.parse();
                }
                body.push_back(std::move(n));
            } else if (word == "for") {
                auto n = std::make_unique<Node>(Node::K::For);
                n->targets.push_back(ep.expectName());
                while (ep.isOp(",")) {
                    ++p;
                    n->targets.push_back(ep.expectName());
                }
                if (!ep.isName("in"))
                    fail("expected 'in' in a for");
                ++p;
                {
                    // The iterable without a trailing `if` (parsed as the loop's filter).
                    std::size_t q = p;
                    std::vector<Token> head;
                    int nesting = 0;
                    for (; piece.tokens[q].type != Tok::End; ++q) {
                        const auto& tk = piece.tokens[q];
                        if (tk.type == Tok::Op && (tk.text == "(" || tk.text == "[" || tk.text == "{"))
                            ++nesting;
                        if (tk.type == Tok::Op && (tk.text == ")" || tk.text == "]" || tk.text == "}"))
                            --nesting;
                        if (nesting == 0 && tk.type == Tok::Name && (tk.text == "if" || tk.text == "recursive"))
                            break;
                        head.push_back(tk);
                    }
                    head.push_back({Tok::End, ""});
                    std::size_t hp = 0;
                    ExprParser hpP(head, hp);
                    n->expr = hpP.parse();
                    if (hpP.peek().type != Tok::End)
                        fail("unexpected '" + hpP.peek().text + "' in a for");
                    p = q;
                    if (ep.isName("recursive"))
                        fail("recursive loops are not supported");
                    if (ep.isName("if")) {
                        ++p;
                        n->filter = ep.parse();
                    }
                }
                done();
                n->body = parseBody({"else", "endfor"}, depth + 1);
                if (m_at >= m_pieces.size())
                    fail("a for without endfor");
                if (keyword(m_pieces[m_at]) == "else") {
                    ++m_at;
                    n->orelse = parseBody({"endfor"}, depth + 1);
                    if (m_at >= m_pieces.size())
                        fail("a for without endfor");
                }
                ++m_at;
                body.push_back(std::move(n));
            } else if (word == "set") {
                auto n = std::make_unique<Node>(Node::K::Set);
                n->text = ep.expectName();
                if (ep.isOp(".")) {
                    ++p;
                    n->attr = ep.expectName();
                }
                if (ep.isOp(","))
                    fail("set with several targets is not supported");
                if (!ep.isOp("="))
                    fail("set blocks ({% set x %}...{% endset %}) are not supported");
                ++p;
                n->expr = ep.parse();
                done();
                body.push_back(std::move(n));
            } else if (word == "macro") {
                auto def = std::make_shared<MacroDef>();
                def->name = ep.expectName();
                ep.expectOp("(");
                while (!ep.isOp(")")) {
                    def->params.push_back(ep.expectName());
                    if (ep.isOp("=")) {
                        ++p;
                        def->defaults.push_back(ep.parse());
                    } else {
                        def->defaults.push_back(nullptr);
                    }
                    if (!ep.isOp(","))
                        break;
                    ++p;
                }
                ep.expectOp(")");
                done();
                def->body = parseBody({"endmacro"}, depth + 1);
                if (m_at >= m_pieces.size())
                    fail("a macro without endmacro");
                ++m_at;
                auto n = std::make_unique<Node>(Node::K::Macro);
                n->macro = std::move(def);
                body.push_back(std::move(n));
            } else if (word == "generation") {
                done();
                auto n = std::make_unique<Node>(Node::K::Block);
                n->body = parseBody({"endgeneration"}, depth + 1);
                if (m_at >= m_pieces.size())
                    fail("a generation block without endgeneration");
                ++m_at;
                body.push_back(std::move(n));
            } else if (word == "break" || word == "continue") {
                done();
                body.push_back(std::make_unique<Node>(word == "break" ? Node::K::Break : Node::K::Continue));
            } else {
                fail("the statement '" + word + "' is not supported");
            }
        }
        if (!until.empty())
            fail("a block is not closed (expected " + until.back() + ")");
        return body;
    }
};

// ------------------------------------------------------------------------------------------ evaluation

struct LoopControl {
    bool isBreak;
};

class Renderer {
public:
    explicit Renderer(const nlohmann::ordered_json& context)
    {
        m_scopes.emplace_back();
        for (const auto& [key, value] : context.items())
            m_scopes.front()[key] = fromJson(value);
    }

    std::string run(const Body& body)
    {
        std::string out;
        exec(body, out);
        return out;
    }

private:
    std::vector<std::map<std::string, Value>> m_scopes;
    std::int64_t m_steps = 0;
    int m_calls = 0;

    void step()
    {
        if (++m_steps > kMaxSteps)
            fail("the template takes too many steps");
    }

    Value lookup(const std::string& name) const
    {
        for (auto it = m_scopes.rbegin(); it != m_scopes.rend(); ++it)
            if (const auto f = it->find(name); f != it->end())
                return f->second;
        if (name == "raise_exception" || name == "namespace" || name == "range" || name == "dict") {
            Value v(Value::K::Method);
            v.s = name;
            return v;
        }
        return {};
    }

    void emit(std::string& out, const std::string& s)
    {
        out += s;
        if (out.size() > kMaxOutput)
            fail("the template's output is too long");
    }

    void exec(const Body& body, std::string& out)
    {
        for (const auto& node : body) {
            step();
            switch (node->k) {
            case Node::K::Text: emit(out, node->text); break;
            case Node::K::Output: emit(out, text(eval(*node->expr))); break;
            case Node::K::If:
                for (const auto& [cond, branch] : node->branches)
                    if (!cond || truthy(eval(*cond))) {
                        exec(branch, out);
                        break;
                    }
                break;
            case Node::K::For: loop(*node, out); break;
            case Node::K::Set: {
                auto value = eval(*node->expr);
                if (node->attr.empty()) {
                    m_scopes.back()[node->text] = std::move(value);
                } else {
                    const auto target = lookup(node->text);
                    if (target.k != Value::K::Ns)
                        fail("set " + node->text + "." + node->attr + ": " + node->text + " is not a namespace");
                    target.ns->attrs[node->attr] = std::move(value);
                }
                break;
            }
            case Node::K::Macro: {
                Value v(Value::K::Macro);
                v.macro = node->macro;
                m_scopes.back()[node->macro->name] = std::move(v);
                break;
            }
            case Node::K::Block: exec(node->body, out); break;
            case Node::K::Break: throw LoopControl{true};
            case Node::K::Continue: throw LoopControl{false};
            }
        }
    }

    static List iterate(const Value& v)
    {
        switch (v.k) {
        case Value::K::List: return *v.list;
        case Value::K::Dict: {
            List keys;
            for (const auto& [key, value] : *v.dict)
                keys.push_back(Value::str(key));
            return keys;
        }
        case Value::K::Str: {
            List chars;
            for (const auto c : unicode::decodeUtf8(v.s))
                chars.push_back(Value::str(unicode::encodeUtf8(std::u32string(1, c))));
            return chars;
        }
        case Value::K::Undefined: return {};
        default: fail(std::string("a ") + kindName(v) + " is not iterable");
        }
    }

    void bind(const std::vector<std::string>& targets, const Value& item)
    {
        if (targets.size() == 1) {
            m_scopes.back()[targets[0]] = item;
            return;
        }
        const auto parts = iterate(item);
        if (parts.size() != targets.size())
            fail("cannot unpack " + std::to_string(parts.size()) + " values into " + std::to_string(targets.size()));
        for (std::size_t i = 0; i < parts.size(); ++i)
            m_scopes.back()[targets[i]] = parts[i];
    }

    void loop(const Node& node, std::string& out)
    {
        auto items = iterate(eval(*node.expr));
        if (node.filter) {
            List kept;
            for (const auto& item : items) {
                m_scopes.emplace_back();
                bind(node.targets, item);
                const bool keep = truthy(eval(*node.filter));
                m_scopes.pop_back();
                if (keep)
                    kept.push_back(item);
            }
            items = std::move(kept);
        }
        if (items.empty()) {
            exec(node.orelse, out);
            return;
        }
        const auto n = static_cast<std::int64_t>(items.size());
        for (std::int64_t i = 0; i < n; ++i) {
            m_scopes.emplace_back();
            bind(node.targets, items[static_cast<std::size_t>(i)]);
            Dict info{{"index", Value::integer(i + 1)}, {"index0", Value::integer(i)}, {"revindex", Value::integer(n - i)},
                {"revindex0", Value::integer(n - i - 1)}, {"first", Value::boolean(i == 0)}, {"last", Value::boolean(i == n - 1)},
                {"length", Value::integer(n)}, {"previtem", i > 0 ? items[static_cast<std::size_t>(i - 1)] : Value()},
                {"nextitem", i + 1 < n ? items[static_cast<std::size_t>(i + 1)] : Value()}};
            m_scopes.back()["loop"] = Value::ofDict(std::move(info));
            try {
                exec(node.body, out);
            } catch (const LoopControl& c) {
                m_scopes.pop_back();
                if (c.isBreak)
                    break;
                continue;
            }
            m_scopes.pop_back();
        }
    }

    Value callMacro(const MacroDef& def, List args, std::vector<std::pair<std::string, Value>> kwargs)
    {
        if (++m_calls > kMaxDepth)
            fail("macros call each other too deeply");
        if (args.size() > def.params.size())
            fail("the macro " + def.name + " takes " + std::to_string(def.params.size()) + " arguments");
        // The macro sees the template's top-level names and its own; not its caller's locals.
        std::vector<std::map<std::string, Value>> saved;
        saved.swap(m_scopes);
        m_scopes.push_back(saved.front());
        m_scopes.emplace_back();
        std::string out;
        try {
            for (std::size_t i = 0; i < def.params.size(); ++i) {
                const auto& name = def.params[i];
                const auto kw = std::find_if(kwargs.begin(), kwargs.end(), [&](const auto& p) { return p.first == name; });
                if (i < args.size())
                    m_scopes.back()[name] = args[i];
                else if (kw != kwargs.end())
                    m_scopes.back()[name] = kw->second;
                else if (def.defaults[i])
                    m_scopes.back()[name] = eval(*def.defaults[i]);
                else
                    m_scopes.back()[name] = Value();
            }
            for (const auto& [key, value] : kwargs)
                if (std::find(def.params.begin(), def.params.end(), key) == def.params.end())
                    fail("the macro " + def.name + " has no argument " + key);
            exec(def.body, out);
        } catch (...) {
            saved.front() = m_scopes.front();
            m_scopes.swap(saved);
            --m_calls;
            throw;
        }
        saved.front() = m_scopes.front();  // namespaces are shared; top-level sets stay
        m_scopes.swap(saved);
        --m_calls;
        return Value::str(std::move(out));
    }

    static std::int64_t index(std::int64_t i, std::int64_t n) { return i < 0 ? i + n : i; }

    Value item(const Value& v, const Value& key)
    {
        if (v.k == Value::K::Dict) {
            if (const auto* found = v.find(text(key)); found && key.k == Value::K::Str)
                return *found;
            return {};
        }
        if (v.k == Value::K::List || v.k == Value::K::Str) {
            if (key.k != Value::K::Int && key.k != Value::K::Bool)
                return {};
            if (v.k == Value::K::List) {
                const auto n = static_cast<std::int64_t>(v.list->size());
                const auto i = index(key.i, n);
                if (i < 0 || i >= n)
                    fail("list index " + std::to_string(key.i) + " out of range");
                return (*v.list)[static_cast<std::size_t>(i)];
            }
            const auto chars = unicode::decodeUtf8(v.s);
            const auto n = static_cast<std::int64_t>(chars.size());
            const auto i = index(key.i, n);
            if (i < 0 || i >= n)
                fail("string index " + std::to_string(key.i) + " out of range");
            return Value::str(unicode::encodeUtf8(std::u32string(1, chars[static_cast<std::size_t>(i)])));
        }
        if (v.k == Value::K::Ns) {
            const auto f = v.ns->attrs.find(text(key));
            return f == v.ns->attrs.end() ? Value() : f->second;
        }
        if (v.k == Value::K::Undefined)
            fail("indexing an undefined value ([" + repr(key) + "])");
        return {};
    }

    Value attribute(const Value& v, const std::string& name)
    {
        if (v.k == Value::K::Dict) {
            if (const auto* found = v.find(name))
                return *found;
            if (name == "items" || name == "keys" || name == "values" || name == "get")
                return method(v, name);
            return {};
        }
        if (v.k == Value::K::Ns) {
            const auto f = v.ns->attrs.find(name);
            return f == v.ns->attrs.end() ? Value() : f->second;
        }
        if (v.k == Value::K::Str) {
            static const char* const kMethods[] = {"strip", "lstrip", "rstrip", "split", "startswith", "endswith", "upper", "lower",
                "replace", "title", "capitalize", "find", "join"};
            for (const char* m : kMethods)
                if (name == m)
                    return method(v, name);
            return {};
        }
        if (v.k == Value::K::Undefined)
            fail("reading ." + name + " of an undefined value");
        return {};
    }

    static Value method(const Value& self, const std::string& name)
    {
        Value m(Value::K::Method);
        m.s = name;
        m.self = std::make_shared<Value>(self);
        return m;
    }

    static Value slice(
        const Value& v, const std::optional<std::int64_t>& start, const std::optional<std::int64_t>& stop, std::int64_t stepBy)
    {
        if (stepBy == 0)
            fail("a slice step cannot be zero");
        const bool isList = v.k == Value::K::List;
        if (!isList && v.k != Value::K::Str)
            fail(std::string("a ") + kindName(v) + " cannot be sliced");
        const auto chars = isList ? std::u32string() : unicode::decodeUtf8(v.s);
        const auto n = isList ? static_cast<std::int64_t>(v.list->size()) : static_cast<std::int64_t>(chars.size());
        auto clampIndex = [&](std::optional<std::int64_t> x, std::int64_t def) {
            if (!x)
                return def;
            auto i = *x < 0 ? *x + n : *x;
            if (stepBy > 0)
                return std::clamp<std::int64_t>(i, 0, n);
            return std::clamp<std::int64_t>(i, -1, n - 1);
        };
        const auto from = clampIndex(start, stepBy > 0 ? 0 : n - 1), to = clampIndex(stop, stepBy > 0 ? n : -1);
        List l;
        std::u32string s;
        for (auto i = from; stepBy > 0 ? i < to : i > to; i += stepBy) {
            if (isList)
                l.push_back((*v.list)[static_cast<std::size_t>(i)]);
            else
                s += chars[static_cast<std::size_t>(i)];
        }
        return isList ? Value::ofList(std::move(l)) : Value::str(unicode::encodeUtf8(s));
    }

    static std::string asciiCase(std::string s, bool upper)
    {
        for (auto& c : s)
            c = static_cast<char>(upper ? std::toupper(static_cast<unsigned char>(c)) : std::tolower(static_cast<unsigned char>(c)));
        return s;
    }

    static std::string titleCase(const std::string& s)
    {
        std::string out;
        bool previousLetter = false;
        for (const char c : s) {
            const bool letter = std::isalpha(static_cast<unsigned char>(c)) != 0;
            out += static_cast<char>(
                letter ? (previousLetter ? std::tolower(static_cast<unsigned char>(c)) : std::toupper(static_cast<unsigned char>(c))) : c);
            previousLetter = letter;
        }
        return out;
    }

    static std::string stripChars(const std::string& s, const std::optional<std::string>& chars, bool left, bool right)
    {
        if (!chars) {
            // Python's whitespace, as the tokenizer's strip knows it: the stripped text starts at
            // the first other character, so its first occurrence is where it stands.
            const auto core = stripPythonWhitespace(s);
            if (core.empty())
                return core;
            const auto at = s.find(core);
            return s.substr(left ? at : 0, (left ? 0 : at) + core.size() + (right ? 0 : s.size() - at - core.size()));
        }
        const auto set = unicode::decodeUtf8(*chars);
        const auto u = unicode::decodeUtf8(s);
        std::size_t a = 0, b = u.size();
        while (left && a < b && set.find(u[a]) != std::u32string::npos)
            ++a;
        while (right && b > a && set.find(u[b - 1]) != std::u32string::npos)
            --b;
        return unicode::encodeUtf8(std::u32string_view(u).substr(a, b - a));
    }

    static List splitString(const std::string& s, const Value& sep, std::int64_t maxSplit)
    {
        List out;
        if (sep.k == Value::K::None || sep.k == Value::K::Undefined) {
            // Runs of whitespace, none at either end.
            std::size_t i = 0;
            std::int64_t splits = 0;
            while (i < s.size()) {
                while (i < s.size() && isSpace(s[i]))
                    ++i;
                if (i >= s.size())
                    break;
                if (maxSplit >= 0 && splits == maxSplit) {
                    auto tail = s.substr(i);
                    while (!tail.empty() && isSpace(tail.back()))
                        tail.pop_back();
                    out.push_back(Value::str(tail));
                    return out;
                }
                std::size_t j = i;
                while (j < s.size() && !isSpace(s[j]))
                    ++j;
                out.push_back(Value::str(s.substr(i, j - i)));
                ++splits;
                i = j;
            }
            return out;
        }
        if (sep.k != Value::K::Str)
            fail("split: the separator must be a string");
        if (sep.s.empty())
            fail("split: an empty separator");
        std::size_t from = 0;
        std::int64_t splits = 0;
        for (;;) {
            const auto at = s.find(sep.s, from);
            if (at == std::string::npos || (maxSplit >= 0 && splits == maxSplit)) {
                out.push_back(Value::str(s.substr(from)));
                return out;
            }
            out.push_back(Value::str(s.substr(from, at - from)));
            from = at + sep.s.size();
            ++splits;
        }
    }

    Value callMethod(const Value& m, List args, const std::vector<std::pair<std::string, Value>>& kwargs)
    {
        const auto& name = m.s;
        auto arg = [&](std::size_t i, const char* key = nullptr) -> Value {
            if (i < args.size())
                return args[i];
            if (key)
                for (const auto& [k, v] : kwargs)
                    if (k == key)
                        return v;
            return {};
        };
        if (!m.self) {  // globals
            if (name == "raise_exception")
                fail("the template refused: " + text(arg(0)));
            if (name == "namespace" || name == "dict") {
                if (name == "dict") {
                    Dict d;
                    for (const auto& [k, v] : kwargs)
                        d.emplace_back(k, v);
                    return Value::ofDict(std::move(d));
                }
                Value ns(Value::K::Ns);
                ns.ns = std::make_shared<Namespace>();
                for (const auto& [k, v] : kwargs) {
                    if (!k.empty() && k[0] == '_')
                        fail("a namespace attribute cannot start with an underscore");
                    ns.ns->attrs[k] = v;
                }
                return ns;
            }
            if (name == "range") {
                std::int64_t start = 0, stop = 0, by = 1;
                if (args.size() == 1)
                    stop = args[0].i;
                else if (args.size() >= 2)
                    start = args[0].i, stop = args[1].i, by = args.size() > 2 ? args[2].i : 1;
                if (by == 0)
                    fail("range() step cannot be zero");
                List l;
                for (auto i = start; by > 0 ? i < stop : i > stop; i += by) {
                    if (static_cast<std::int64_t>(l.size()) >= kMaxRange)
                        fail("range() is too long");
                    l.push_back(Value::integer(i));
                }
                return Value::ofList(std::move(l));
            }
            fail(name + "() is not supported");
        }
        const auto& self = *m.self;
        if (self.k == Value::K::Dict) {
            if (name == "items") {
                List l;
                for (const auto& [k, v] : *self.dict)
                    l.push_back(Value::ofTuple({Value::str(k), v}));
                return Value::ofList(std::move(l));
            }
            if (name == "keys" || name == "values") {
                List l;
                for (const auto& [k, v] : *self.dict)
                    l.push_back(name == "keys" ? Value::str(k) : v);
                return Value::ofList(std::move(l));
            }
            if (name == "get") {
                const auto* found = self.find(text(arg(0)));
                if (found)
                    return *found;
                return args.size() > 1 ? args[1] : Value::none();
            }
        }
        if (self.k == Value::K::Str) {
            const auto& s = self.s;
            auto optionalText = [&](std::size_t i) -> std::optional<std::string> {
                const auto v = arg(i);
                if (v.k == Value::K::None || v.k == Value::K::Undefined)
                    return std::nullopt;
                return text(v);
            };
            if (name == "strip" || name == "lstrip" || name == "rstrip")
                return Value::str(stripChars(s, optionalText(0), name != "rstrip", name != "lstrip"));
            if (name == "split") {
                const auto max = arg(1, "maxsplit");
                return Value::ofList(splitString(s, arg(0, "sep"), max.k == Value::K::Int ? max.i : -1));
            }
            if (name == "startswith" || name == "endswith") {
                const auto probe = arg(0);
                List options = probe.k == Value::K::List ? *probe.list : List{probe};
                for (const auto& o : options) {
                    const auto t = text(o);
                    if (name == "startswith" ? s.rfind(t, 0) == 0
                                             : (s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0))
                        return Value::boolean(true);
                }
                return Value::boolean(false);
            }
            if (name == "upper" || name == "lower")
                return Value::str(asciiCase(s, name == "upper"));
            if (name == "title")
                return Value::str(titleCase(s));
            if (name == "capitalize")
                return Value::str(s.empty() ? s : asciiCase(s.substr(0, 1), true) + asciiCase(s.substr(1), false));
            if (name == "replace") {
                const auto from = text(arg(0)), to = text(arg(1));
                const auto countArg = arg(2);
                std::int64_t count = countArg.k == Value::K::Int ? countArg.i : -1;
                if (from.empty())
                    fail("replace: an empty pattern is not supported");
                std::string out;
                std::size_t at = 0;
                for (;;) {
                    const auto f = s.find(from, at);
                    if (f == std::string::npos || count == 0) {
                        out += s.substr(at);
                        break;
                    }
                    out += s.substr(at, f - at) + to;
                    at = f + from.size();
                    --count;
                }
                return Value::str(out);
            }
            if (name == "find") {
                const auto f = s.find(text(arg(0)));
                return Value::integer(f == std::string::npos ? -1 : codepoints(s.substr(0, f)));
            }
            if (name == "join") {
                std::string out;
                const auto items = iterate(arg(0));
                for (std::size_t i = 0; i < items.size(); ++i)
                    out += (i ? s : "") + text(items[i]);
                return Value::str(out);
            }
        }
        fail(std::string("the method ") + name + " of a " + kindName(self) + " is not supported");
    }

    Value call(const Expr& e)
    {
        List args;
        std::vector<std::pair<std::string, Value>> kwargs;
        for (const auto& a : e.args)
            args.push_back(eval(*a));
        for (const auto& [k, v] : e.kwargs)
            kwargs.emplace_back(k, eval(*v));
        const auto callee = eval(*e.a);
        if (callee.k == Value::K::Macro)
            return callMacro(*callee.macro, std::move(args), std::move(kwargs));
        if (callee.k == Value::K::Method)
            return callMethod(callee, std::move(args), kwargs);
        fail(std::string("a ") + kindName(callee) + " cannot be called");
    }

    bool test(const std::string& name, const Value& v, const List& args)
    {
        using K = Value::K;
        if (name == "defined")
            return v.k != K::Undefined;
        if (name == "undefined")
            return v.k == K::Undefined;
        if (name == "none")
            return v.k == K::None;
        if (name == "boolean")
            return v.k == K::Bool;
        if (name == "true")
            return v.k == K::Bool && v.b;
        if (name == "false")
            return v.k == K::Bool && !v.b;
        if (name == "integer")
            return v.k == K::Int;
        if (name == "float")
            return v.k == K::Float;
        if (name == "number")
            return v.k == K::Int || v.k == K::Float || v.k == K::Bool;
        if (name == "string")
            return v.k == K::Str;
        if (name == "mapping")
            return v.k == K::Dict;
        if (name == "sequence")
            return v.k == K::List || v.k == K::Str || v.k == K::Dict;
        if (name == "iterable")
            return v.k == K::List || v.k == K::Str || v.k == K::Dict;
        if (name == "callable")
            return v.k == K::Macro || v.k == K::Method;
        if (name == "eq" || name == "equalto" || name == "==" || name == "sameas")
            return !args.empty() && equal(v, args[0]);
        if (name == "ne" || name == "!=")
            return args.empty() || !equal(v, args[0]);
        if (name == "in")
            return !args.empty() && contains(args[0], v);
        if (name == "odd" || name == "even" || name == "divisibleby") {
            if (v.k != K::Int)
                fail("the test " + name + " takes an integer");
            if (name == "divisibleby") {
                if (args.empty() || args[0].k != K::Int || args[0].i == 0)
                    fail("divisibleby takes a non-zero integer");
                return v.i % args[0].i == 0;
            }
            return (v.i % 2 != 0) == (name == "odd");
        }
        if (name == "lower" || name == "upper")
            return v.k == K::Str && asciiCase(v.s, name == "upper") == v.s;
        fail("the test '" + name + "' is not supported");
    }

    bool contains(const Value& container, const Value& needle)
    {
        switch (container.k) {
        case Value::K::Str:
            if (needle.k != Value::K::Str)
                fail("'in <string>' needs a string on the left");
            return container.s.find(needle.s) != std::string::npos;
        case Value::K::List:
            return std::any_of(container.list->begin(), container.list->end(), [&](const Value& x) { return equal(x, needle); });
        case Value::K::Dict: return needle.k == Value::K::Str && container.find(needle.s) != nullptr;
        case Value::K::Undefined: fail("'in' an undefined value");
        default: fail(std::string("'in' a ") + kindName(container));
        }
    }

    Value applyFilter(const std::string& name, const Value& v, const List& args, const std::vector<std::pair<std::string, Value>>& kwargs)
    {
        using K = Value::K;
        auto kw = [&](const char* key, std::size_t position) -> Value {
            if (position < args.size())
                return args[position];
            for (const auto& [k, x] : kwargs)
                if (k == key)
                    return x;
            return {};
        };
        if (name == "default" || name == "d") {
            const bool boolean = truthy(kw("boolean", 1));
            if (v.k == K::Undefined || (boolean && !truthy(v)))
                return args.empty() ? Value::str("") : args[0];
            return v;
        }
        if (name == "safe" || name == "string")
            return name == "safe" ? v : Value::str(text(v));
        if (name == "trim") {
            if (v.k != K::Str)
                return Value::str(stripPythonWhitespace(text(v)));
            const auto chars = kw("chars", 0);
            return Value::str(stripChars(v.s, chars.k == K::Str ? std::optional(chars.s) : std::nullopt, true, true));
        }
        if (name == "upper" || name == "lower")
            return Value::str(asciiCase(text(v), name == "upper"));
        if (name == "title")
            return Value::str(titleCase(text(v)));
        if (name == "capitalize") {
            const auto s = text(v);
            return Value::str(s.empty() ? s : asciiCase(s.substr(0, 1), true) + asciiCase(s.substr(1), false));
        }
        if (name == "length" || name == "count") {
            if (v.k == K::Str)
                return Value::integer(codepoints(v.s));
            if (v.k == K::List)
                return Value::integer(static_cast<std::int64_t>(v.list->size()));
            if (v.k == K::Dict)
                return Value::integer(static_cast<std::int64_t>(v.dict->size()));
            if (v.k == K::Undefined)
                return Value::integer(0);
            fail(std::string("length of a ") + kindName(v));
        }
        if (name == "list")
            return Value::ofList(iterate(v));
        if (name == "first" || name == "last") {
            const auto items = iterate(v);
            if (items.empty())
                return {};
            return name == "first" ? items.front() : items.back();
        }
        if (name == "reverse") {
            if (v.k == K::Str) {
                auto u = unicode::decodeUtf8(v.s);
                std::reverse(u.begin(), u.end());
                return Value::str(unicode::encodeUtf8(u));
            }
            auto items = iterate(v);
            std::reverse(items.begin(), items.end());
            return Value::ofList(std::move(items));
        }
        if (name == "join") {
            const auto sep = kw("d", 0);
            const auto attr = kw("attribute", 1);
            std::string out;
            const auto items = iterate(v);
            for (std::size_t i = 0; i < items.size(); ++i)
                out += (i ? text(sep) : "") + text(attr.k == K::Str ? attribute(items[i], attr.s) : items[i]);
            return Value::str(out);
        }
        if (name == "dictsort" || name == "items") {
            if (v.k == K::Undefined)
                return Value::ofList({});
            if (v.k != K::Dict)
                fail(name + " takes a mapping, not a " + kindName(v));
            auto items = *v.dict;
            if (name == "dictsort") {
                const bool caseSensitive = truthy(kw("case_sensitive", 0));
                const auto by = kw("by", 1);
                const bool byValue = by.k == K::Str && by.s == "value";
                const bool reverse = truthy(kw("reverse", 2));
                std::stable_sort(items.begin(), items.end(), [&](const auto& a, const auto& b) {
                    const auto key = [&](const auto& item) {
                        const auto t = byValue ? item.second : Value::str(item.first);
                        return t.k == K::Str && !caseSensitive ? Value::str(asciiCase(t.s, false)) : t;
                    };
                    const int c = compare(key(a), key(b));
                    return reverse ? c > 0 : c < 0;
                });
            }
            List l;
            for (const auto& [k, x] : items)
                l.push_back(Value::ofTuple({Value::str(k), x}));
            return Value::ofList(std::move(l));
        }
        if (name == "map" || name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
            const auto items = iterate(v);
            List out;
            if (name == "map") {
                const auto attr = kw("attribute", 99);
                if (attr.k == K::Str) {
                    const auto fallback = kw("default", 99);
                    for (const auto& x : items) {
                        auto a = attribute(x, attr.s);
                        out.push_back(a.k == K::Undefined && fallback.k != K::Undefined ? fallback : a);
                    }
                } else {
                    if (args.empty() || args[0].k != K::Str)
                        fail("map takes a filter name or attribute=");
                    const List rest(args.begin() + 1, args.end());
                    for (const auto& x : items)
                        out.push_back(applyFilter(args[0].s, x, rest, {}));
                }
                return Value::ofList(std::move(out));
            }
            const bool byAttr = name == "selectattr" || name == "rejectattr";
            const bool keep = name == "select" || name == "selectattr";
            if (byAttr && (args.empty() || args[0].k != K::Str))
                fail(name + " takes an attribute name");
            const std::size_t testAt = byAttr ? 1 : 0;
            for (const auto& x : items) {
                const auto subject = byAttr ? attribute(x, args[0].s) : x;
                bool passed = false;
                if (args.size() > testAt) {
                    if (args[testAt].k != K::Str)
                        fail(name + " takes a test name");
                    const List testArgs(args.begin() + static_cast<std::ptrdiff_t>(testAt) + 1, args.end());
                    passed = test(args[testAt].s, subject, testArgs);
                } else {
                    passed = truthy(subject);
                }
                if (passed == keep)
                    out.push_back(x);
            }
            return Value::ofList(std::move(out));
        }
        if (name == "tojson") {
            const auto indent = kw("indent", 1);
            std::string out;
            toJson(v, out,
                indent.k == K::Int ? std::optional<int>(static_cast<int>(std::clamp<std::int64_t>(indent.i, 0, 16))) : std::nullopt,
                truthy(kw("sort_keys", 4)), 0);
            return Value::str(out);
        }
        if (name == "int") {
            if (v.k == K::Int || v.k == K::Bool)
                return Value::integer(v.k == K::Bool ? v.b : v.i);
            if (v.k == K::Float)
                return Value::integer(static_cast<std::int64_t>(v.f));
            if (v.k == K::Str) {
                std::int64_t x = 0;
                const auto s = stripPythonWhitespace(v.s);
                const auto r = std::from_chars(s.data(), s.data() + s.size(), x);
                return r.ec == std::errc() && r.ptr == s.data() + s.size() ? Value::integer(x)
                                                                           : (args.empty() ? Value::integer(0) : args[0]);
            }
            return args.empty() ? Value::integer(0) : args[0];
        }
        if (name == "float") {
            if (v.isNumber())
                return Value::real(v.number());
            if (v.k == K::Str) {
                char* end = nullptr;
                const auto s = stripPythonWhitespace(v.s);
                const double x = std::strtod(s.c_str(), &end);
                return end && *end == '\0' && !s.empty() ? Value::real(x) : Value::real(0.0);
            }
            return Value::real(0.0);
        }
        if (name == "replace") {
            Value m = method(Value::str(text(v)), "replace");
            return callMethod(m, args, {});
        }
        fail("the filter '" + name + "' is not supported");
    }

    Value arithmetic(const std::string& op, const Value& a, const Value& b)
    {
        using K = Value::K;
        if (op == "~")
            return Value::str(text(a) + text(b));
        if (op == "+") {
            if (a.k == K::Str && b.k == K::Str)
                return Value::str(a.s + b.s);
            if (a.k == K::List && b.k == K::List) {
                auto l = *a.list;
                l.insert(l.end(), b.list->begin(), b.list->end());
                return Value::ofList(std::move(l));
            }
        }
        if (!a.isNumber() || !b.isNumber())
            fail(std::string("'") + op + "' between a " + kindName(a) + " and a " + kindName(b));
        const bool ints = a.k != K::Float && b.k != K::Float;
        const auto ai = a.k == K::Bool ? static_cast<std::int64_t>(a.b) : a.i, bi = b.k == K::Bool ? static_cast<std::int64_t>(b.b) : b.i;
        if (op == "+")
            return ints ? Value::integer(ai + bi) : Value::real(a.number() + b.number());
        if (op == "-")
            return ints ? Value::integer(ai - bi) : Value::real(a.number() - b.number());
        if (op == "*")
            return ints ? Value::integer(ai * bi) : Value::real(a.number() * b.number());
        if (op == "/") {
            if (b.number() == 0)
                fail("division by zero");
            return Value::real(a.number() / b.number());
        }
        if (op == "//" || op == "%") {
            if (b.number() == 0)
                fail("division by zero");
            if (ints) {
                auto q = ai / bi;
                if ((ai % bi != 0) && ((ai < 0) != (bi < 0)))
                    --q;
                return op == "//" ? Value::integer(q) : Value::integer(ai - q * bi);
            }
            const auto q = std::floor(a.number() / b.number());
            return op == "//" ? Value::real(q) : Value::real(a.number() - q * b.number());
        }
        if (op == "**") {
            if (ints && bi >= 0 && bi < 64) {
                std::int64_t r = 1;
                for (std::int64_t k = 0; k < bi; ++k)
                    r *= ai;
                return Value::integer(r);
            }
            return Value::real(std::pow(a.number(), b.number()));
        }
        fail("the operator " + op + " is not supported");
    }

    Value eval(const Expr& e)
    {
        step();
        using K = Expr::K;
        switch (e.k) {
        case K::Literal: return e.literal;
        case K::Name: return lookup(e.name);
        case K::List: {
            List l;
            for (const auto& a : e.args)
                l.push_back(eval(*a));
            return e.name == "tuple" ? Value::ofTuple(std::move(l)) : Value::ofList(std::move(l));
        }
        case K::Dict: {
            Dict d;
            for (std::size_t i = 0; i + 1 < e.args.size(); i += 2) {
                const auto key = eval(*e.args[i]);
                if (key.k != Value::K::Str)
                    fail("dict keys must be strings here");
                auto value = eval(*e.args[i + 1]);
                const auto existing = std::find_if(d.begin(), d.end(), [&](const auto& p) { return p.first == key.s; });
                if (existing != d.end())
                    existing->second = std::move(value);
                else
                    d.emplace_back(key.s, std::move(value));
            }
            return Value::ofDict(std::move(d));
        }
        case K::Attr: return attribute(eval(*e.a), e.name);
        case K::Item: return item(eval(*e.a), eval(*e.b));
        case K::Slice: {
            const auto v = eval(*e.a);
            auto bound = [&](const ExprPtr& x) -> std::optional<std::int64_t> {
                if (!x)
                    return std::nullopt;
                const auto b = eval(*x);
                if (b.k == Value::K::None)
                    return std::nullopt;
                if (b.k != Value::K::Int)
                    fail("slice bounds must be integers");
                return b.i;
            };
            const auto by = e.args.empty() ? std::optional<std::int64_t>(1) : bound(e.args[0]);
            return slice(v, bound(e.b), bound(e.c), by.value_or(1));
        }
        case K::Call: return call(e);
        case K::Filter: {
            List args;
            std::vector<std::pair<std::string, Value>> kwargs;
            for (const auto& a : e.args)
                args.push_back(eval(*a));
            for (const auto& [k, v] : e.kwargs)
                kwargs.emplace_back(k, eval(*v));
            return applyFilter(e.name, eval(*e.a), args, kwargs);
        }
        case K::Test: {
            List args;
            for (const auto& a : e.args)
                args.push_back(eval(*a));
            const bool r = test(e.name, eval(*e.a), args);
            return Value::boolean(e.negated ? !r : r);
        }
        case K::Unary: {
            const auto v = eval(*e.a);
            if (e.name == "not")
                return Value::boolean(!truthy(v));
            if (!v.isNumber())
                fail("unary " + e.name + " on a " + kindName(v));
            if (e.name == "+")
                return v;
            return v.k == Value::K::Float ? Value::real(-v.f) : Value::integer(-(v.k == Value::K::Bool ? v.b : v.i));
        }
        case K::Binary: {
            if (e.name == "and") {
                auto a = eval(*e.a);
                return truthy(a) ? eval(*e.b) : a;
            }
            if (e.name == "or") {
                auto a = eval(*e.a);
                return truthy(a) ? a : eval(*e.b);
            }
            const auto a = eval(*e.a), b = eval(*e.b);
            if (e.name == "==")
                return Value::boolean(equal(a, b));
            if (e.name == "!=")
                return Value::boolean(!equal(a, b));
            if (e.name == "<")
                return Value::boolean(compare(a, b) < 0);
            if (e.name == ">")
                return Value::boolean(compare(a, b) > 0);
            if (e.name == "<=")
                return Value::boolean(compare(a, b) <= 0);
            if (e.name == ">=")
                return Value::boolean(compare(a, b) >= 0);
            if (e.name == "in")
                return Value::boolean(contains(b, a));
            if (e.name == "not in")
                return Value::boolean(!contains(b, a));
            return arithmetic(e.name, a, b);
        }
        case K::Cond: return truthy(eval(*e.b)) ? eval(*e.a) : e.c ? eval(*e.c) : Value();
        }
        return {};
    }
};

// A tokenizer_config.json token entry: a string, or an AddedToken dict with "content".
std::optional<std::string> tokenText(const nlohmann::json& j)
{
    if (j.is_string())
        return j.get<std::string>();
    if (j.is_object() && j.contains("content") && j["content"].is_string())
        return j["content"].get<std::string>();
    return std::nullopt;
}

}  // namespace

Result<std::string> renderJinja(std::string_view source, const nlohmann::ordered_json& context, const std::string& origin)
{
    if (source.size() > kMaxSource)
        return makeError(ErrorCode::InvalidFormat,
            origin + ": the chat template is " + std::to_string(source.size()) + " bytes, more than a template can be");
    // Jinja's lexer: every line ending read as "\n", and one final newline dropped.
    std::string normalized;
    normalized.reserve(source.size());
    for (std::size_t i = 0; i < source.size(); ++i) {
        if (source[i] == '\r') {
            normalized += '\n';
            if (i + 1 < source.size() && source[i + 1] == '\n')
                ++i;
        } else {
            normalized += source[i];
        }
    }
    if (!normalized.empty() && normalized.back() == '\n')
        normalized.pop_back();
    try {
        Parser parser(split(normalized));
        const auto body = parser.parseAll();
        Renderer renderer(context);
        return renderer.run(body);
    } catch (const TemplateError& e) {
        return makeError(ErrorCode::Unsupported, origin + ": " + e.message);
    } catch (const LoopControl&) {
        return makeError(ErrorCode::InvalidFormat, origin + ": break or continue outside a loop");
    }
}

Result<std::string> renderChatTemplate(const ChatTemplate& chatTemplate, const std::vector<ChatMessage>& messages, bool addGenerationPrompt)
{
    nlohmann::ordered_json context;
    auto list = nlohmann::ordered_json::array();
    for (const auto& m : messages) {
        nlohmann::ordered_json message;
        message["role"] = m.role;
        if (m.parts.empty()) {
            message["content"] = m.content;
        } else {
            auto parts = nlohmann::ordered_json::array();
            for (const auto& p : m.parts) {
                nlohmann::ordered_json part;
                part["type"] = p.type;
                if (p.type == "text")
                    part["text"] = p.text;
                parts.push_back(std::move(part));
            }
            message["content"] = std::move(parts);
        }
        list.push_back(std::move(message));
    }
    context["messages"] = std::move(list);
    context["tools"] = nullptr;
    context["documents"] = nullptr;
    context["add_generation_prompt"] = addGenerationPrompt;
    for (const auto& [name, value] : chatTemplate.specialTokens)
        context[name] = value;
    return renderJinja(chatTemplate.source, context, chatTemplate.origin);
}

Result<std::optional<ChatTemplate>> chatTemplateIn(const std::filesystem::path& folder)
{
    auto readSmall = [](const std::filesystem::path& p) -> std::optional<std::string> {
        std::error_code ec;
        if (!std::filesystem::is_regular_file(p, ec) || std::filesystem::file_size(p, ec) > 64ull << 20)
            return std::nullopt;
        std::ifstream in(p, std::ios::binary);
        std::ostringstream s;
        s << in.rdbuf();
        return in || in.eof() ? std::optional(s.str()) : std::nullopt;
    };
    ChatTemplate t;
    std::optional<nlohmann::json> config;
    if (const auto text = readSmall(folder / "tokenizer_config.json")) {
        auto parsed = jsonutil::parseUntrusted(*text, (folder / "tokenizer_config.json").string());
        if (!parsed)
            return parsed.error();
        if (parsed->is_object())
            config = std::move(*parsed);
    }
    if (config)
        for (const char* name : {"bos_token", "eos_token", "pad_token", "unk_token"})
            if (config->contains(name))
                if (const auto token = tokenText((*config)[name]))
                    t.specialTokens[name] = *token;
    if (const auto jinja = readSmall(folder / "chat_template.jinja")) {
        t.source = *jinja;
        t.origin = (folder / "chat_template.jinja").string();
        return std::optional(std::move(t));
    }
    if (config && config->contains("chat_template")) {
        const auto& c = (*config)["chat_template"];
        t.origin = (folder / "tokenizer_config.json").string() + " (chat_template)";
        if (c.is_string()) {
            t.source = c.get<std::string>();
            return std::optional(std::move(t));
        }
        if (c.is_array())
            for (const auto& named : c)
                if (named.is_object() && named.value("name", std::string()) == "default" && named.contains("template")
                    && named["template"].is_string()) {
                    t.source = named["template"].get<std::string>();
                    return std::optional(std::move(t));
                }
        return makeError(ErrorCode::InvalidFormat, t.origin + ": is neither a template nor a list holding a \"default\" one");
    }
    return std::optional<ChatTemplate>();
}

}  // namespace vireo::text
