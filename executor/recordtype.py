"""Frozen value classes that cost nothing to define: what toolexec's records are made with.

``@record`` gives a class what ``@dataclass(frozen=True, kw_only=True)`` gives it (an
``__init__`` from its annotated fields, ``__repr__``, ``__eq__``, ``__hash__``, no
assignment after construction), and :func:`replace`, :func:`asdict` and
:func:`field_names` mirror the ``dataclasses`` functions. Type checkers see it as a
dataclass (PEP 681 ``dataclass_transform``), and so does the ``dataclasses`` module:
``dataclasses.replace``, ``asdict``, ``fields`` and ``is_dataclass`` work on records, as they
did when the records were dataclasses.

Why not ``dataclasses``: every ``toolexec run`` is a fresh process that needs the records
on its path, and there ``import dataclasses`` (which imports ``inspect``, ``ast`` and
``dis``) plus generating each class's methods with ``exec`` took ~17 ms of a ~35 ms
budget (benchmarks/RESULTS.md). These methods are generic instead: the class is
defined in microseconds, and an instance costs a loop over its fields.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs a one-shot run ~3 ms; type checkers treat this name as True
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar

    from typing_extensions import dataclass_transform

    T = TypeVar("T")

__all__ = ["FrozenInstanceError", "asdict", "field", "field_names", "record", "replace"]

_MISSING: Any = object()
_FIELDS = "__record_fields__"


class FrozenInstanceError(AttributeError):
    """Assigning to (or deleting) a field of a record after it was made."""


class _Field:
    """How one field is filled when the caller leaves it out, and whether it takes part in equality."""

    __slots__ = ("compare", "default", "factory", "name")

    def __init__(self, name: str, default: Any, factory: Callable[[], Any] | None, compare: bool) -> None:
        self.name, self.default, self.factory, self.compare = name, default, factory, compare


class _Spec:
    """What :func:`field` returns: read once by :func:`record` and replaced on the class by the default."""

    __slots__ = ("compare", "default", "factory")

    def __init__(self, default: Any, factory: Callable[[], Any] | None, compare: bool) -> None:
        self.default, self.factory, self.compare = default, factory, compare


def field(*, default: Any = _MISSING, default_factory: Callable[[], Any] | None = None, compare: bool = True) -> Any:
    """A field's default (or a factory making a fresh one per record), and whether ``==`` looks at it."""
    return _Spec(default, default_factory, compare)


def _init(self: Any, *args: Any, **kwargs: Any) -> None:
    spec: tuple[_Field, ...] = getattr(type(self), _FIELDS)
    if args:
        if type(self).__record_kw_only__:
            raise TypeError(f"{type(self).__name__}() takes keyword arguments only; got {len(args)} positional")
        if len(args) > len(spec):
            raise TypeError(f"{type(self).__name__}() takes at most {len(spec)} positional arguments; got {len(args)}")
        for one, value in zip(spec, args, strict=False):
            if one.name in kwargs:
                raise TypeError(f"{type(self).__name__}() got multiple values for argument {one.name!r}")
            kwargs[one.name] = value
    values = self.__dict__
    for one in spec:
        value = kwargs.pop(one.name, _MISSING)
        if value is _MISSING:
            if one.factory is not None:
                value = one.factory()
            elif one.default is _MISSING:
                raise TypeError(f"{type(self).__name__}() missing required argument {one.name!r}")
            else:
                value = one.default
        values[one.name] = value
    if kwargs:
        raise TypeError(f"{type(self).__name__}() got an unexpected keyword argument {next(iter(kwargs))!r}")


def _compared(self: Any) -> tuple[Any, ...]:
    return tuple(self.__dict__[one.name] for one in getattr(type(self), _FIELDS) if one.compare)


def _eq(self: Any, other: object) -> bool:
    if other.__class__ is not self.__class__:
        return NotImplemented
    return _compared(self) == _compared(other)


def _hash(self: Any) -> int:
    return hash(_compared(self))


def _repr(self: Any) -> str:
    shown = ", ".join(f"{one.name}={self.__dict__[one.name]!r}" for one in getattr(type(self), _FIELDS))
    return f"{type(self).__qualname__}({shown})"


def _setattr(self: Any, name: str, value: Any) -> None:
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _delattr(self: Any, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r}")


class _DataclassFields:
    """``__dataclass_fields__`` made on first use, so the ``dataclasses`` functions accept records.

    Only a program that uses ``dataclasses`` itself reads it, and then the import costs nothing more.
    """

    def __get__(self, instance: object, owner: type) -> dict[str, Any]:
        made = owner.__dict__.get("__record_dataclass_fields__")
        if made is None:
            import dataclasses

            made = {}
            annotations = {}
            for klass in reversed(owner.__mro__):
                annotations.update(klass.__dict__.get("__annotations__", {}))  # noqa: RUF063 - no inspect import
            for one in getattr(owner, _FIELDS):
                if one.factory is not None:
                    made[one.name] = dataclasses.field(default_factory=one.factory, compare=one.compare)
                else:
                    default = dataclasses.MISSING if one.default is _MISSING else one.default
                    made[one.name] = dataclasses.field(default=default, compare=one.compare)
                made[one.name].name = one.name
                made[one.name].type = annotations.get(one.name, "Any")
                made[one.name]._field_type = dataclasses._FIELD  # type: ignore[attr-defined] # what fields() lists
            type.__setattr__(owner, "__record_dataclass_fields__", made)
        return made  # type: ignore[no-any-return]


class _Factory:
    """Stands for a default made by a factory in a signature (as ``dataclasses`` shows it)."""

    def __repr__(self) -> str:
        return "<factory>"


class _Signature:
    """``__signature__`` made on first use: ``inspect.signature(ToolCall)`` and ``help()`` show the fields.

    Only a program that asks (``help``, an IDE's runtime inspection, ``inspect``) pays for ``inspect``.
    """

    def __get__(self, instance: object, owner: type) -> Any:
        made = owner.__dict__.get("__record_signature__")
        if made is None:
            import inspect

            annotations: dict[str, Any] = {}
            for klass in reversed(owner.__mro__):
                annotations.update(klass.__dict__.get("__annotations__", {}))  # noqa: RUF063 - no inspect import
            kind = inspect.Parameter.KEYWORD_ONLY if owner.__record_kw_only__ else inspect.Parameter.POSITIONAL_OR_KEYWORD  # type: ignore[attr-defined]
            parameters = []
            for one in getattr(owner, _FIELDS):
                if one.factory is not None:
                    default: Any = _Factory()
                else:
                    default = inspect.Parameter.empty if one.default is _MISSING else one.default
                annotation = annotations.get(one.name, inspect.Parameter.empty)
                parameters.append(inspect.Parameter(one.name, kind, default=default, annotation=annotation))
            made = inspect.Signature(parameters, return_annotation=None)
            type.__setattr__(owner, "__record_signature__", made)
        return made


def _make(cls: type[T], kw_only: bool, frozen: bool) -> type[T]:
    fields: dict[str, _Field] = {}
    for base in reversed(cls.__mro__[1:]):
        for one in getattr(base, _FIELDS, ()):
            fields[one.name] = one
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():  # noqa: RUF063 - no inspect import
        if str(annotation).startswith(("ClassVar", "typing.ClassVar")):
            continue
        declared = cls.__dict__.get(name, _MISSING)
        if isinstance(declared, _Spec):
            fields[name] = _Field(name, declared.default, declared.factory, declared.compare)
            if declared.default is _MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, declared.default)
        else:
            fields[name] = _Field(name, declared, None, True)
    setattr(cls, _FIELDS, tuple(fields.values()))
    methods: list[tuple[str, Any]] = [("__init__", _init), ("__repr__", _repr), ("__eq__", _eq)]
    if frozen:
        methods += [("__hash__", _hash), ("__setattr__", _setattr), ("__delattr__", _delattr)]
    else:  # as a dataclass with eq and without frozen: changeable, so not hashable
        methods.append(("__hash__", None))
    for name, method in methods:
        setattr(cls, name, method)
    setattr(cls, "__dataclass_fields__", _DataclassFields())  # noqa: B010
    setattr(cls, "__signature__", _Signature())  # noqa: B010
    setattr(cls, "__record_kw_only__", kw_only)  # noqa: B010 - not a name a type checker knows
    setattr(cls, "__match_args__", () if kw_only else tuple(fields))  # noqa: B010
    return cls


if TYPE_CHECKING:

    @dataclass_transform(kw_only_default=True, frozen_default=True, field_specifiers=(field,))
    def record(cls: type[T] | None = None, /, *, kw_only: bool = True, frozen: bool = True) -> Any:
        """Make ``cls`` a record: ``@record`` (frozen, keyword-only), ``@record(kw_only=False)``, ``@record(frozen=False)``."""

else:

    def record(cls=None, /, *, kw_only=True, frozen=True):
        """Make ``cls`` a record: ``@record`` (frozen, keyword-only), ``@record(kw_only=False)``, ``@record(frozen=False)``."""
        if cls is None:
            return lambda later: _make(later, kw_only, frozen)
        return _make(cls, kw_only, frozen)


def field_names(item: Any) -> tuple[str, ...]:
    """The field names of a record (or record class), in declaration order."""
    return tuple(one.name for one in getattr(item, _FIELDS))


def replace(item: T, **changes: Any) -> T:
    """A copy of the record ``item`` with ``changes`` (made through ``__init__``, so it is checked the same way)."""
    values = {name: item.__dict__[name] for name in field_names(item)}
    values.update(changes)
    return type(item)(**values)


def asdict(item: Any) -> dict[str, Any]:
    """The record as a dict, recursively through records, lists, tuples and dicts (as ``dataclasses.asdict``)."""
    if not hasattr(type(item), _FIELDS):
        raise TypeError(f"asdict() needs a record, not {type(item).__name__}")
    return _plain(item)  # type: ignore[no-any-return]


_ATOMS = frozenset({str, int, float, bool, bytes, type(None)})


def _plain(value: Any) -> Any:
    kind = type(value)
    if kind in _ATOMS:  # most of a declaration (a schema's leaves): first, and without a call
        return value
    if kind is dict:  # a schema: plain keys, values made plain as they come
        return {k if type(k) is str else _plain(k): v if type(v) in _ATOMS else _plain(v) for k, v in value.items()}
    fields = getattr(kind, _FIELDS, None)
    if fields is not None:
        values = value.__dict__
        return {one.name: _plain(values[one.name]) for one in fields}
    if isinstance(value, tuple | list):
        return type(value)(_plain(one) for one in value)
    if isinstance(value, dict):
        return type(value)((_plain(k), _plain(v)) for k, v in value.items())
    if isinstance(value, str | int | float | bool | bytes) or value is None:
        return value
    import copy  # as dataclasses.asdict: anything else is copied deeply

    return copy.deepcopy(value)
