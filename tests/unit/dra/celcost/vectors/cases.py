"""Writes cases.json: the selectors and devices whose Kubernetes verdicts and costs main.go
records."""

import json

GPU = {
    "driver": "gpu.example.com",
    "attributes": {
        "model": {"string": "a100"},
        "index": {"int": 3},
        "healthy": {"bool": True},
        "driverVersion": {"version": "1.2.3"},
        "uuid": {"string": "gpu-" + "x" * 60},
        "other.example.com/zone": {"string": "zone-a"},
    },
    "capacity": {"memory": "80Gi", "cores": "1500m", "other.example.com/bw": "10G"},
}
cases = []


def c(name, expr, device=GPU):
    cases.append({"name": name, "expression": expr, "device": device})


A = 'device.attributes["gpu.example.com"]'
C = 'device.capacity["gpu.example.com"]'
# basics
c("const_true", "true")
c("driver_eq", 'device.driver == "gpu.example.com"')
c("driver_ne", 'device.driver != "gpu.example.com"')
c("two_clause", f'device.driver == "gpu.example.com" && {A}.model == "a100"')
c("attr_select", f'{A}.model == "a100"')
c("attr_index", f'{A}["model"] == "a100"')
c("int_lt", f"{A}.index < 4")
c("int_ge", f"{A}.index >= 4")
c("int_arith", f"{A}.index * 2 + 1 - 3 / 2 % 5 == 6")
c("bool_attr", f"{A}.healthy")
c("not", f"!{A}.healthy")
c("or_short", f"{A}.healthy || {A}.index == 1")
c("and_short", f"!{A}.healthy && {A}.index == 1")
c("or_error_absorbed", f"{A}.nosuch == 1 || true")
c("and_error_absorbed", f"{A}.nosuch == 1 && false")
c("and_error", f"{A}.nosuch == 1 && true")
c("ternary_true", f"{A}.healthy ? {A}.index == 3 : false")
c("ternary_false", f'!{A}.healthy ? true : {A}.model == "x"')
c("ternary_attr_branches", f'({A}.healthy ? {A}.model : device.driver) == "a100"')
c("in_map", f'"model" in {A}')
c("in_map_unknown_domain", '"model" in device.attributes["nosuch.example.com"]')
c("in_list_const", f'{A}.model in ["a100", "h100", "b200"]')
c("in_list_dynamic", f'{A}.model in [device.driver, "a100"]')
c("has_attr", f"has({A}.model)")
c("has_missing", f"has({A}.nosuch)")
c("has_domain", "has(device.attributes.foo)")
c("other_domain", 'device.attributes["other.example.com"].zone == "zone-a"')
c("unknown_domain_key", 'device.attributes["nosuch.example.com"].model == "x"')
c("no_such_key", f'{A}.nosuch == "x"')
c("multi_alloc", "!device.allowMultipleAllocations")
c("string_size", f"size({A}.model) == 4 && {A}.model.size() == 4")
c("starts", f'{A}.uuid.startsWith("gpu-")')
c("ends", f'{A}.uuid.endsWith("xxx")')
c("contains", f'{A}.uuid.contains("xxxxxxxxxxxx")')
c("matches", f'{A}.uuid.matches("^gpu-x+$")')
c("matches_global", f'matches({A}.model, "a[0-9]+")')
c("lower", f'{A}.model.upperAscii().lowerAscii() == "a100"')
c("split_join", f'{A}.uuid.split("-").join("+").size() > 3')
c("replace", f'{A}.uuid.replace("x", "y").startsWith("gpu-y")')
c("substring", f'{A}.uuid.substring(0, 3) == "gpu"')
c("substring1", f'{A}.uuid.substring(60) == "xxxx"')
c("indexOf", f'{A}.uuid.indexOf("x") == 4 && {A}.uuid.lastIndexOf("x") > 4')
c("trim", '"  a  ".trim() == "a"')
c("charAt", f'{A}.model.charAt(0) == "a"')
c("string_concat", f'{A}.model + "-" + device.driver == "a100-gpu.example.com"')
c("string_lt", f'{A}.model < "b"')
c("long_string_ne", f'{A}.uuid != "y"')
c("list_literal_size", "[1, 2, 3].size() == 3")
c("list_dynamic", f"[{A}.index, 2][0] == 3")
c("map_literal", '{"a": 1, "b": 2}["b"] == 2')
c("map_dynamic", f'{{"a": {A}.index}}.a == 3')
c("list_concat", f"([{A}.index] + [1, 2]).size() == 3")
c("all", "[1, 2, 3].all(x, x > 0)")
c("all_false", "[1, 2, 3].all(x, x > 1)")
c("exists", "[1, 2, 3].exists(x, x == 2)")
c("exists_one", "[1, 2, 3].exists_one(x, x == 2)")
c("map_macro", "[1, 2, 3].map(x, x * 2)[2] == 6")
c("map_filter_macro", "[1, 2, 3].map(x, x > 1, x * 2).size() == 2")
c("filter", "[1, 2, 3].filter(x, x > 1).size() == 2")
c("map_over_map", f"{A}.all(k, k.size() > 0)")
c("nested_exists", "[1, 2].exists(x, [3, 4].exists(y, x + y == 6))")
L40 = "[" + ", ".join(str(i) for i in range(40)) + "]"
c("nested_40_cubed", f"{L40}.all(x, {L40}.all(y, {L40}.all(z, x + y + z >= 0)))")
c("nested_40_cubed_map", f"{L40}.map(x, {L40}.filter(y, y % 2 == 0).size()).size() == 40")
c("bind", f'cel.bind(a, {A}, a.model == "a100" && a.index == 3)')
c("bind_nested", "cel.bind(x, 2, cel.bind(y, x * 3, y == 6))")
c("optional_select", f'{A}.?nosuch.orValue("d") == "d"')
c("optional_present", f'{A}.?model.orValue("d") == "a100"')
c("optional_index", 'device.attributes[?"nosuch.example.com"].hasValue() == true')
c("optional_of", "optional.of(1).value() == 1")
c("optional_none", "optional.none().orValue(5) == 5")
c("quantity_cmp", f'{C}.memory.compareTo(quantity("80Gi")) == 0')
c("quantity_gt", f'{C}.memory.isGreaterThan(quantity("40Gi"))')
c("quantity_lt", f'{C}.cores.isLessThan(quantity("2"))')
c("quantity_add_sub", f'{C}.memory.add(quantity("1Gi")).sub(1).isGreaterThan({C}.memory)')
c("quantity_int", f"{C}.memory.asInteger() == 85899345920")
c("quantity_not_int", f"{C}.cores.isInteger()")
c("quantity_asint_error", f"{C}.cores.asInteger() == 1")
c("quantity_float", f"{C}.cores.asApproximateFloat() == 1.5")
c("quantity_sign", f"{C}.cores.sign() == 1")
c("quantity_eq", f'{C}.memory == quantity("80Gi")')
c("is_quantity", 'isQuantity("1Gi") && !isQuantity("x")')
c("quantity_bad", 'quantity("x").sign() == 1')
c("other_capacity", 'device.capacity["other.example.com"].bw.isGreaterThan(quantity("1G"))')
c("semver_cmp", f'{A}.driverVersion.isGreaterThan(semver("1.2.0"))')
c(
    "semver_parts",
    f"{A}.driverVersion.major() == 1 && {A}.driverVersion.minor() == 2"
    f" && {A}.driverVersion.patch() == 3",
)
c("semver_compareTo", f'{A}.driverVersion.compareTo(semver("1.10.0")) < 0')
c("semver_eq", f'{A}.driverVersion == semver("1.2.3")')
c("is_semver", 'isSemver("1.2.3") && !isSemver("1.2")')
c("div_zero", f"{A}.index / 0 == 1")
c("mod_zero", f"{A}.index % 0 == 1")
c("overflow", f"{A}.index * 9223372036854775807 == 1")
c("bad_overload_dyn", f"{A}.model > 1")
c("dyn_mixed_eq", f"{A}.model == 1")
c("num_cross", f"{A}.index == 3.0 && {A}.index < 3.5")
c("result_int", f"{A}.index")
c("result_string", f"{A}.model")
c("type_conv", f'string({A}.index) == "3" && int("4") == 4 && double({A}.index) == 3.0')
c("list_index_oob", "[1, 2][5] == 1")
N = "x" * 200
c(
    "regex_heavy",
    f"[{', '.join(str(i) for i in range(100))}]"
    f'.all(i, ("{N}" + string(i)).matches("^(x+x+)+y$") == false)',
)
c(
    "cost_exceeded",
    f'{L40}.all(x, {L40}.all(y, {L40}.all(z, ("{N}" + string(z)).matches("x+y") == false)))',
)
c("cost_just_under", f"{L40}.all(x, {L40}.all(y, x + y >= 0))")
c(
    "string_ext_misc",
    '"a,b,c".split(",").size() == 3 && "abc".indexOf("c") == 2 && "ABC".lowerAscii() == "abc"',
)
c("strings_quote", 'strings.quote("a") == "\\"a\\""')
c("format", '"%d-%s".format([1, "a"]) == "1-a"')
c("join_list", '["a", "b"].join() == "ab"')
c("map_literal_dynamic_key", f'{{{A}.model: 1}}["a100"] == 1')
c("nested_list_in", "[[1], [2]].exists(l, 2 in l)")
c("size_list", f"size([{A}.index, 1]) == 2")
c("dyn_list_in", f"{A}.index in [1, 2, {A}.index]")
c("ternary_error_cond", f"{A}.nosuch ? true : false")
c("exists_error_absorbed", "[0, 1].exists(x, 1 / x == 1)")
c("all_error", "[0, 1].all(x, 1 / x == 1)")
with open("cases.json", "w") as out:
    json.dump(cases, out, indent=1)
print(len(cases))
