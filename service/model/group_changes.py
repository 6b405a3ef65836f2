"""Changes of a model's members, policies and learning (``service.model.group``), as
methods of ``Models`` (``service.model.models``): ``add_challenger``, ``remove_challenger``,
``promote``, ``set_policy``, ``set_learning``.

Each is a change outside the log, made by a process that writes snapshots (the learner,
or the ``all`` role; an api replica refuses it): checked first (a 4xx, nothing changed),
applied, the limits checked again, then saved as the model's next snapshot before anyone
sees it (``service.model.changes``); anything failing leaves the model as it was. With an
idempotency key, a retry gets the first answer.
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import ValidationError

from service.durability.idempotency import Key
from service.exceptions import Conflict, InvalidRequest, NotFound, ServiceError, Unavailable
from service.model import changes
from service.model.group import policy_of
from service.model.kinds import MERGEABLE, plan, task_of
from service.model.live import Footprint, LiveModel, View
from service.model.spec import ChallengerSpec, Learning, PolicyPatch, Promote


class GroupChanges:
    """``Models``'s changes of a model's group (module docstring); they use its ``use``,
    ``_check_writer``, ``writer``, ``registry``, ``limits``, ``_limit`` and ``budget``."""

    def add_challenger(
        self, name: str, challenger: ChallengerSpec, view: View, key: Key | None = None
    ) -> dict:
        """A challenger learning the model's feedback from the next example on, counted as
        a model by the limits; durable before the answer (the model's ``view``)."""

        def apply(live: LiveModel) -> None:
            if challenger.name in live.group.names():
                raise Conflict(
                    "member_exists", f"model {name!r} has a member named {challenger.name!r}"
                )
            try:
                spec = challenger.of(live.spec)
            except ValidationError as error:
                raise InvalidRequest("invalid_input", f"the challenger: {error}") from None
            checked = plan(spec, self.limits)
            if live.group.policy.parallel is not None and not checked.kind.mergeable:
                raise InvalidRequest(
                    "invalid_params",
                    f"model {name!r} learns in parallel: a challenger of kind "
                    f"{checked.kind.name!r} would not merge by aligned averaging (kinds: "
                    f"{', '.join(MERGEABLE)})",
                    {"field": "kind"},
                )
            if task_of(checked) != task_of(live.plan):
                raise InvalidRequest(
                    "invalid_input",
                    f"a challenger learns the model's task ({task_of(live.plan)}), not "
                    f"{task_of(checked)}",
                    {"field": "kind"},
                )
            if checked.kind.margins:
                resolved = "platt" if checked.calibrated else "none"
                spec = spec.model_copy(update={"calibration": resolved})
            footprint = live.footprint()
            grown = Footprint(footprint.models + 1, footprint.nbytes + checked.nbytes)
            self.registry.update(live, grown, self._limit(), self.budget)
            live.group.add(live.new_member(spec, checked, challenger.name))

        return self._change(name, key, apply, view)

    def remove_challenger(self, name: str, member: str) -> None:
        """Take a challenger out (its learning, metrics and comparisons go), durably."""

        def apply(live: LiveModel) -> None:
            group = live.group
            if member not in group.names():
                raise NotFound("member_not_found", f"model {name!r} has no member {member!r}")
            if member == group.champion.name:
                raise Conflict(
                    "member_serves",
                    f"{member!r} serves model {name!r}: promote another member first",
                )
            group.remove(member)

        self._change(name, None, apply, None)

    def promote(self, name: str, promotion: Promote, view: View, key: Key | None = None) -> dict:
        """The challenger (and variant) serves from now on; the champion stays a challenger,
        so that a promotion can be undone by another. Durable before the answer."""

        def apply(live: LiveModel) -> None:
            if promotion.challenger not in live.group.names():
                raise NotFound(
                    "member_not_found",
                    f"model {name!r} has no member {promotion.challenger!r}",
                )
            member = live.group.member(promotion.challenger)
            if promotion.variant == "averaged" and not member.averaged:
                raise InvalidRequest(
                    "no_averaged_variant",
                    f"member {promotion.challenger!r} has no time-averaged variant",
                )
            live.group.promote(promotion.challenger, promotion.variant)

        return self._change(name, key, apply, view)

    def set_policy(self, name: str, patch: PolicyPatch, view: View, key: Key | None = None):
        """New policies (promotion, serving, drift), durable before the answer."""

        def apply(live: LiveModel) -> None:
            live.group.set_policy(policy_of(patch, live.group.policy))

        return self._change(name, key, apply, view)

    def set_learning(self, name: str, learning: Learning, view: View, key: Key | None = None):
        """Pause learning, or resume it (the backlog learned in order, or dropped)."""
        if learning.paused and learning.discard:
            raise InvalidRequest(
                "invalid_input",
                "discard drops the backlog when learning resumes: give it with paused false",
                {"field": "discard"},
            )
        if learning.paused:
            return self._change(name, key, lambda live: live.group.pause(True), view)
        return self._change(name, key, None, view, resume=learning.discard)

    def _change(
        self, name: str, key: Key | None, apply, view: View | None, resume: bool | None = None
    ) -> dict | None:
        """A change of a model's group outside the log: ``apply(live)`` checks it (a 4xx,
        nothing changed) and applies it, the limits are checked again, and it is saved before
        anyone sees it (anything failing: everything as it was); with ``resume`` set,
        learning resumes instead (``changes.resume``: ``resume`` says whether the backlog
        is dropped). With an idempotency ``key``, a retry gets the first answer."""
        self._check_writer()
        with self.use(name) as live:
            answer = live.answers.claim(key) if key is not None else None
            if answer is not None:
                return answer.replay(key)
            save = lambda capture: self.writer.write(live, capture)  # noqa: E731
            group, before = live.group, live.footprint()

            def change() -> Callable[[], None]:
                checkpoint = group.checkpoint()
                try:
                    apply(live)
                    self.registry.update(live, live.footprint(), self._limit(), self.budget)
                except BaseException:
                    group.rollback(checkpoint)
                    raise

                def undo() -> None:
                    group.rollback(checkpoint)
                    self.registry.update(live, before, None, None)

                return undo

            try:
                if resume is not None:
                    return changes.resume(live, resume, save, view, key)
                return changes.change(live, change, save, view, key)
            except ServiceError:
                raise
            except Exception as error:
                raise Unavailable(
                    "store_unavailable",
                    "the change could not be written as the newest snapshot, so the model "
                    f"is unchanged: {error}",
                ) from None
            finally:
                if key is not None:
                    live.answers.release(key)
