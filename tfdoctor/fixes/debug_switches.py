"""``debug-switches``: take out a debugging switch the script left on (``tf.debugging.enable_check_numerics()``)."""

from __future__ import annotations

import libcst as cst
from libcst.codemod import SkipFile
from libcst.metadata import PositionProvider

from tfdoctor.fixes._base import Fix, FixCodemod, FixContext
from tfdoctor.fixes._cst import call_name, walk
from tfdoctor.model import DEBUG_SWITCHES


def _api_of(call: cst.Call, on: set[str]) -> str | None:
    """The switch of :data:`DEBUG_SWITCHES` this call turns on (matched on the API's last two names, so
    ``tf.debugging.enable_check_numerics`` and ``tensorflow.debugging.enable_check_numerics`` alike), when
    the run's facts show that switch on; ``set_log_device_placement`` only with a true argument."""
    name = call_name(call) or ""
    for api in on:
        if name.split(".")[-2:] != api.split(".")[-2:]:
            continue
        if api.endswith("set_log_device_placement"):
            arg = call.args[0].value if call.args else None
            if not (isinstance(arg, cst.Name) and arg.value == "True"):
                continue
        return api
    return None


class DebugSwitchesCodemod(FixCodemod):
    DESCRIPTION = "debugging switches left on taken out"
    METADATA_DEPENDENCIES = (PositionProvider,)

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        on = {
            api
            for api, _, _ in DEBUG_SWITCHES
            if any(s.startswith(f"{api}()") for s in self.fix.facts.debug_switches)
        }
        found: list[tuple[cst.SimpleStatementLine, str]] = []  # in source order
        for stmt in walk(tree):
            if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
                continue
            small = stmt.body[0]
            if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
                api = _api_of(small.value, on)
                if api is not None:
                    found.append((stmt, api))
        if not found:
            raise SkipFile(
                "the switch on in the run ("
                + ", ".join(self.fix.facts.debug_switches)
                + ") is not turned on by a statement of its own in the script: turn it off where it is set"
            )
        self.targets = {id(stmt): api for stmt, api in found}
        self.summary = "taken out: " + "; ".join(f"{api}() (line {self.line(stmt)})" for stmt, api in found)
        return super().transform_module_impl(tree)

    def leave_SimpleStatementLine(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> cst.SimpleStatementLine:
        api = self.targets.get(id(original_node))
        if api is None:
            return updated_node
        what = next(cost for a, _, cost in DEBUG_SWITCHES if a == api)
        code = cst.Module([]).code_for_node(original_node.body[0]).strip()
        note = cst.EmptyLine(comment=cst.Comment(f"# tfdoctor debug-switches: `{code}` taken out ({what})"))
        # a statement of its own becomes `pass` under the comment: valid in any block (an `if args.debug:`)
        return updated_node.with_changes(body=[cst.Pass()], leading_lines=[*updated_node.leading_lines, note])


class DebugSwitches(Fix):
    """Take out a debugging switch the script left on while it trains.

    What it changes: the statement that turns on a switch the run's facts show on while it trained
    (``tf.debugging.enable_check_numerics()``, ``tf.debugging.experimental.enable_dump_debug_info(...)``,
    ``tf.data.experimental.enable_debug_mode()``, ``tf.debugging.set_log_device_placement(True)``) becomes
    ``pass`` under a comment saying what was taken out. Left from a debugging session, such a switch makes
    every step pay: check_numerics adds a NaN/Inf check to every op's float output (4.6x slower steps on a
    small ``tf.function`` loop here), the dump writes every op's tensors, tf.data's debug mode runs the
    pipeline's functions eagerly and in order. The training computes the same numbers without it; what is
    lost is the check (a NaN is no longer caught where it appears).

    When it applies: the harness saw the switch turned on and not off again (``debug_switches`` in the
    facts: the switch and the line that set it), and the script turns it on in a statement of its own.
    It is tried first, before the fixes the findings rank: every other fix measured with the switch on
    would be measured on a distorted step.

    Rolled back when: not faster beyond the noise band, or not sane (same losses).
    """

    ID = "debug-switches"
    DESCRIPTION = "debugging switches left on taken out"
    CODEMOD = DebugSwitchesCodemod
    PRIORITY = 5
    FIRST = True

    def precheck(self, ctx: FixContext) -> str | None:
        if not ctx.facts.debug_switches:
            return (
                "no debugging switch (check_numerics, dump_debug_info, tf.data debug mode, op-placement "
                "logging) was on in the run"
            )
        return None


FIX = DebugSwitches
