"""tap.py - runs unittest modules and prints one TAP line per test method
(`ok - name`, `not ok - name`, `ok - name # SKIP reason`), as
scripts/run-tests.sh counts them; failure tracebacks follow as `#` lines.
Usage: python3 python/tests/tap.py PREFIX test_module.py..."""

import os
import sys
import unittest


class TapResult(unittest.TestResult):
    def __init__(self, prefix):
        super().__init__()
        self.prefix = prefix

    def _name(self, test):
        return f"{self.prefix}{test.id().rsplit('.', 2)[-2]}.{test._testMethodName}"

    def startTest(self, test):
        super().startTest(test)
        self._printed = self._sub_failed = False

    def stopTest(self, test):
        if self._sub_failed and not self._printed:
            self._line(f"not ok - {self._name(test)}")
        super().stopTest(test)

    def _line(self, text, detail=None):
        if text.startswith(("ok - ", "not ok - ")):
            self._printed = True
        print(text, flush=True)
        for line in (detail or "").rstrip().splitlines():
            print(f"#   {line}", flush=True)

    def addSuccess(self, test):
        super().addSuccess(test)
        self._line(f"ok - {self._name(test)}")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._line(f"not ok - {self._name(test)}", self.failures[-1][1])

    def addError(self, test, err):
        super().addError(test, err)
        self._line(f"not ok - {self._name(test)}", self.errors[-1][1])

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._line(f"ok - {self._name(test)} # SKIP {reason}")

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:  # the method's own line follows (stopTest) as not ok
            self._line(f"# failed: {subtest.id()}", self._exc_info_to_string(err, test))
            self._sub_failed = True


def main():
    prefix, paths = sys.argv[1], sys.argv[2:]
    suite = unittest.TestSuite()
    loader = unittest.TestLoader()
    for p in paths:
        sys.path.insert(0, os.path.dirname(os.path.abspath(p)))
        mod = __import__(os.path.splitext(os.path.basename(p))[0])
        suite.addTests(loader.loadTestsFromModule(mod))
    result = TapResult(prefix)
    suite.run(result)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
