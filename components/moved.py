"""Aliases that let a split stack keep the resources ``pulumi state move`` brought from the monolith.

``pulumi state move`` (pulumi/pulumi ``pkg/cmd/pulumi/state/state_move.go``, v3.260.0) moves a
resource with all its children but not its parent: a moved resource whose parent stays behind is
re-parented to the destination's root stack, and ``rewriteURNs`` recomputes its URN and its
descendants' from that new parent. The estate's top-level children (hosts, clusters, tenants,
compositions, composers, the platform's objects; parent :class:`components.estate.Estate`) thus
arrive as ``urn:pulumi:<stack>::<project>::composable:infra:Host::<name>`` while a split stack's
program declares them under its own ``Estate``
(``...::composable:infra:Estate$composable:infra:Host::<name>``).
The alias below tells the engine that a child of the estate may have been a child of the root
stack; the engine matches it (and, through the SDK's inherited child aliases, its descendants) to
the moved state, so the preview shows it unchanged instead of a create and a delete.
"""

from __future__ import annotations

import pulumi


def moved_from_root(parent: pulumi.Resource) -> pulumi.ResourceTransformation:
    """A transformation (for the ``transformations`` option of ``parent``) that gives each direct
    child of ``parent`` the alias ``Alias(parent=ROOT_STACK_RESOURCE)``: its URN as the root stack's
    child, where ``pulumi state move`` puts it. Grandchildren are left alone (their aliases are
    derived from their parent's by the SDK)."""

    def alias(args: pulumi.ResourceTransformationArgs) -> pulumi.ResourceTransformationResult | None:
        if args.opts.parent is not parent:
            return None
        moved = pulumi.ResourceOptions(aliases=[pulumi.Alias(parent=pulumi.ROOT_STACK_RESOURCE)])
        return pulumi.ResourceTransformationResult(args.props, pulumi.ResourceOptions.merge(args.opts, moved))

    return alias
