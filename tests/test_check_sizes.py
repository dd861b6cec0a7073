"""scripts/check_sizes.py measures C as it measures Python: a function from
its signature's first line to the closing brace, an initializer not taken
for one, a source over the module limit named."""

import importlib.util
import pathlib

SCRIPT = pathlib.Path(__file__).parents[1] / "scripts" / "check_sizes.py"
spec = importlib.util.spec_from_file_location("check_sizes", SCRIPT)
check_sizes = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_sizes)


def c_source(body_lines: int) -> str:
    body = "".join(f"    x += {i};\n" for i in range(body_lines))
    return ("static PyMethodDef methods[] = {\n    {NULL, NULL, 0, NULL},\n};\n\n"
            "static PyObject *long_one(PyObject *self,\n                          PyObject *args)\n{\n"
            + body + "    return NULL;\n}\n\nstatic int short_one(void)\n{\n    return 0;\n}\n")


def test_c_functions_are_measured_from_their_signature():
    found = {name: (line, n) for line, name, n in check_sizes.c_functions(c_source(100))}
    assert set(found) == {"long_one", "short_one"}           # the initializer is no function
    assert found["long_one"] == (5, 100 + 5)                 # two signature lines, braces, return
    assert found["short_one"][1] == 4


def test_a_long_c_function_and_a_long_c_file_fail_the_check(tmp_path, capsys):
    (tmp_path / "ok.c").write_text(c_source(10))
    assert check_sizes.main(str(tmp_path)) == 0
    (tmp_path / "long.c").write_text(c_source(90) + "\n" * 600)
    assert check_sizes.main(str(tmp_path)) == 1
    said = capsys.readouterr().out
    assert "long.c:5: long_one is 95 lines" in said and "long.c: 7" in said
