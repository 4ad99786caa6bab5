"""The JVM classes PySpark calls most, looked up once per JVM instead of once per call.

For every Column function it builds, PySpark finds `org.apache.spark.sql.functions` (or
`PythonUtils`, to make a Scala Seq) in the JVM by name, then the method by name: two reflection
round trips before the call itself, ~1,400 of the ~4,800 a backfill makes while it plans, all
driver-only time (0.1-0.4 ms each, more on a busy machine). A class's methods do not change while
its JVM runs: the class and each method found are kept on the session's view of the JVM, where
py4j looks before it asks the JVM.
"""

from __future__ import annotations

from py4j.java_gateway import JavaClass, JavaMember, JVMView

KEPT_CLASSES = (
    "org.apache.spark.sql.functions",
    "org.apache.spark.api.python.PythonUtils",
    "org.apache.spark.sql.api.python.PythonSQLUtils",
)
"""Kept under both names PySpark asks for them by: qualified, and short (imported into the view)."""


class _MethodsKept(JavaClass):
    """A Java class that keeps each static method it finds (not a field: its value may change)."""

    def __getattr__(self, name: str):
        found = super().__getattr__(name)
        if isinstance(found, JavaMember):
            setattr(self, name, found)
        return found


def keep_lookups(jvm: JVMView) -> None:
    """Look `KEPT_CLASSES` and their methods up once in `jvm` (a session's `_jvm`)."""
    for name in KEPT_CLASSES:
        kept = _MethodsKept(name, jvm._gateway_client)
        setattr(jvm, name, kept)
        setattr(jvm, name.rsplit(".", 1)[1], kept)
