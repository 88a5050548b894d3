"""Credentials as secrets, BMC TLS verification, and the composer's RBAC.

Facts: Pulumi secrets are encrypted in state and masked in output (Pulumi docs, "Secrets");
pulumi-kubernetes marks a ``v1/Secret``'s ``data``/``stringData`` secret in its Check step;
a Kubernetes ``cluster-admin`` ClusterRole is ``apiGroups: ["*"], resources: ["*"],
verbs: ["*"]`` plus ``nonResourceURLs: ["*"]``, and the ``escalate``, ``bind`` and
``impersonate`` verbs let a subject grant itself more (Kubernetes docs, "Using RBAC
Authorization", "Privilege escalation prevention").
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from domain.contract import COMPOSER, DPU, ESTATE, HOST

from .model import UNKNOWN, Findings, Path, ResourceRecord, rule
from .reading import INVALID, of_type, read

# Keys (snake_cased) that hold a credential when their value is a string. Deliberately not a
# bare "*_secret" suffix: Kubernetes uses `imagePullSecret`, `pullSecret`... for Secret *names*.
CREDENTIAL_KEY = re.compile(
    r"(^|_)(password|passwd|passphrase|client_secret|shared_secret|secret_key|secret_access_key|token|"
    r"api_key|apikey|private_key)$|^secret$"
)
URL_WITH_PASSWORD = re.compile(r"\b[a-z][a-z0-9+.-]*://[^/\s:@]+:[^/\s@]+@", re.IGNORECASE)
K8S_SECRET = "kubernetes:core/v1:Secret"
K8S_SECRET_FIELDS = ("data", "stringData")
K8S_ROLE_TYPES = (
    "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole",
    "kubernetes:rbac.authorization.k8s.io/v1:Role",
)
K8S_BINDING_TYPES = (
    "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding",
    "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding",
)
ESCALATING_VERBS = {"escalate", "bind", "impersonate"}


def snake(key: str) -> str:
    """``clientSecret`` / ``client-secret`` -> ``client_secret``."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", key).replace("-", "_").lower()


def _walk(value: Any, path: Path) -> Iterator[tuple[Path, Any]]:
    yield path, value
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _walk(child, (*path, key))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            yield from _walk(child, (*path, i))


def _show(path: Path) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if i else p) for i, p in enumerate(path))


def credential_paths(rec: ResourceRecord) -> list[tuple[Path, str]]:
    """Paths in ``rec.props`` that hold credentials, with why: keys named like a credential
    (password, token, secret, private key, API key...) holding a string, URLs with a password in
    them, and a Kubernetes Secret's ``data``/``stringData`` entries."""
    out: list[tuple[Path, str]] = []
    for key, value in rec.props.items():
        if key.startswith("__"):
            continue  # engine-internal inputs such as a dynamic resource's __provider
        for path, node in _walk(value, (key,)):
            last = path[-1]
            if isinstance(last, str) and CREDENTIAL_KEY.search(snake(last)):
                if node is UNKNOWN or (isinstance(node, str) and node):
                    out.append((path, "a credential-named property"))
                    continue
            if isinstance(node, str) and URL_WITH_PASSWORD.search(node):
                out.append((path, "a URL with a password in it"))
    if rec.type == K8S_SECRET:
        for field in K8S_SECRET_FIELDS:
            data = rec.props.get(field)
            if isinstance(data, dict):
                out.extend(((field, k), f"Kubernetes Secret {field}") for k in data)
            elif data is UNKNOWN:
                out.append(((field,), f"Kubernetes Secret {field}"))
    return out


@rule(
    "credentials-are-secrets",
    "Credentials (BMC/Director passwords, tokens, keys, Kubernetes Secret data) are Pulumi secrets.",
)
def credentials_are_secrets(resources: Sequence[ResourceRecord], config: None, found: Findings) -> None:
    """``credentials-are-secrets``: every credential in any resource's inputs (see
    :func:`credential_paths`) is a Pulumi secret. When the engine's secret markings were not
    observable for a resource that holds credentials, the rule fails (cannot be proven)."""
    for rec in resources:
        plain = []
        for path, why in credential_paths(rec):
            secret = rec.is_secret(path)
            if secret is None:
                found.add(rec, f"{_show(path)} ({why}) may be plaintext: secretness was not observable "
                          "for this resource, so this rule cannot be proven",
                          "keep the pack's 'record-resource-inputs' policy at enforcement level "
                          "'remediate' (it is how the pack sees Pulumi secret markings)")
                break
            if not secret:
                plain.append(f"{_show(path)} ({why})")
        if plain:
            found.add(rec, f"credentials are plaintext, not Pulumi secrets: {', '.join(plain)}",
                      "pass them as secrets (pulumi.Output.secret, config.require_secret, or "
                      "`pulumi config set --secret`)")


class TlsConfig(BaseModel):
    """Policy config of ``bmc-tls-verification``."""

    model_config = ConfigDict(extra="forbid")

    lab_environments: list[str] = Field(
        default=["lab"],
        description="Estate environments in which BMC TLS verification may be off.",
    )
    stack_environment: str | None = Field(
        default=None,
        description="When set, the stack's Estate must declare exactly this environment (guards a "
        "production stack against being marked as a lab).",
    )


@rule(
    "bmc-tls-verification",
    "BMC TLS verification is on, except in a stack whose Estate environment is a lab.",
    config_model=TlsConfig,
    enforcement="advisory",
)
def bmc_tls_verification(
    resources: Sequence[ResourceRecord], config: TlsConfig | None, found: Findings
) -> None:
    """``bmc-tls-verification``: Host and Dpu ``bmc_verify_tls`` is true unless the stack's
    Estate ``environment`` is one of ``lab_environments``; with ``stack_environment`` set, the
    Estate must declare that environment."""
    cfg = config or TlsConfig()
    envs: list[Any] = []
    for rec in of_type(resources, ESTATE):
        env = read(rec, "environment", found, kind=str, what="lab, staging or production")
        envs.append(env)
        if cfg.stack_environment is not None and env is not INVALID and env != cfg.stack_environment:
            found.add(rec, f"environment is '{env}' but this stack's policy config says "
                      f"'{cfg.stack_environment}'",
                      f"set the Estate environment to '{cfg.stack_environment}'")
    if cfg.stack_environment is not None and not envs:
        found.add(None, f"the policy config says this is a '{cfg.stack_environment}' stack but no Estate "
                  "declares its environment", "add the Estate component with its environment")
    is_lab = bool(envs) and all(isinstance(e, str) and e in cfg.lab_environments for e in envs)
    if is_lab:
        return
    if not envs:
        env_text = "not declared (no Estate)"
    elif any(e is INVALID for e in envs):
        env_text = "not known during preview"
    else:
        env_text = ", ".join(f"'{e}'" for e in envs)
    for rec in of_type(resources, HOST) + of_type(resources, DPU):
        verify = read(rec, "bmc_verify_tls", found, kind=bool, what="true or false")
        if verify is False:
            address = rec.props.get("bmc_address")
            found.add(rec, f"BMC TLS verification is off (bmc_address {address!r}) in a stack whose "
                      f"environment is {env_text}, not a lab",
                      "set bmc_verify_tls: true and trust the BMC's CA certificate, or mark the stack as "
                      "a lab through its Estate environment if it really is one")


@rule("composer-not-cluster-admin", "The composer's RBAC is not cluster-admin.")
def composer_not_cluster_admin(resources: Sequence[ResourceRecord], config: None, found: Findings) -> None:
    """``composer-not-cluster-admin``: the Composer's ``cluster_admin`` is false, its
    ``rbac_rules`` hold no cluster-admin-equivalent rule (wildcard verbs on wildcard resources or
    non-resource URLs) and no escalate/bind/impersonate verb, and no RBAC object under the
    Composer binds ``cluster-admin`` or grants wildcards."""
    for rec in of_type(resources, COMPOSER):
        admin = read(rec, "cluster_admin", found, kind=bool, what="true or false")
        if admin is True:
            found.add(rec, "cluster_admin is true: the composer would run as cluster-admin",
                      "set cluster_admin: false and grant only the rules the composer needs (pods, nodes, "
                      "its own annotations)")
        rules = read(rec, "rbac_rules", found, kind=list, what="a list of PolicyRule objects")
        if rules is not INVALID:
            for problem in _rule_problems(rules, "rbac_rules"):
                found.add(rec, problem, "narrow rbac_rules to the verbs and resources the composer needs")
    for rec in resources:
        if COMPOSER not in rec.ancestor_types:
            continue
        if rec.type in K8S_BINDING_TYPES:
            ref = rec.props.get("roleRef")
            if ref is UNKNOWN or (isinstance(ref, dict) and ref.get("name") is UNKNOWN):
                found.unprovable(rec, "roleRef")
            elif isinstance(ref, dict) and ref.get("name") == "cluster-admin":
                found.add(rec, "binds the composer to the cluster-admin ClusterRole",
                          "bind the composer to its own narrow ClusterRole")
        elif rec.type in K8S_ROLE_TYPES:
            rules = rec.props.get("rules")
            if rules is UNKNOWN:
                found.unprovable(rec, "rules")
            elif isinstance(rules, list):
                for problem in _rule_problems(rules, "rules"):
                    found.add(rec, problem, "narrow the composer's role to the verbs and resources it needs")


def _rule_problems(rules: list[Any], where: str) -> Iterator[str]:
    for i, policy_rule in enumerate(rules):
        if policy_rule is UNKNOWN or not isinstance(policy_rule, dict):
            state = "not known during preview" if policy_rule is UNKNOWN else repr(policy_rule)
            yield f"{where}[{i}] is {state}, so it cannot be proven narrower than cluster-admin"
            continue
        fields: dict[str, Any] = {}
        for key in ("verbs", "resources", "apiGroups", "nonResourceURLs"):
            value = policy_rule.get(key, policy_rule.get(snake(key)))
            if value is None:
                value = []
            elif not isinstance(value, list) and value is not UNKNOWN:
                value = [value]
            fields[key] = value
        unknown = [k for k, v in fields.items() if v is UNKNOWN or (isinstance(v, list) and UNKNOWN in v)]
        if unknown:
            yield f"{where}[{i}].{'/'.join(unknown)} not known during preview, so the rule cannot be " \
                  "proven narrower than cluster-admin"
            continue
        verbs = set(fields["verbs"])
        if "*" in verbs and ("*" in fields["resources"] or "*" in fields["nonResourceURLs"]):
            target = "resource" if "*" in fields["resources"] else "URL"
            yield f"{where}[{i}] grants every verb on every {target} (cluster-admin equivalent)"
        escalating = sorted(verbs & ESCALATING_VERBS)
        if escalating:
            yield f"{where}[{i}] grants {', '.join(escalating)}, which lets the composer raise its own " \
                  "privileges"
