"""The estate as an inventory folder: files joined, problems naming file, key and rule, secrets only
in credential sets, and the migration of an inline stack file (planned without the CLI)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from stack_config import EstateConfigError, load_estate
from stack_config.__main__ import main
from stack_config.inventory import estate_from_config, join_inventory, read_inventory
from stack_config.migrate import dump_yaml, migrated_stack_config, plan_migration
from tests.config.factories import (
    ALL_PASSWORDS,
    DIRECTOR_PASSWORD,
    DPU_BMC_PASSWORD,
    HOST_BMC_PASSWORD,
    valid_estate,
)

ROOT = Path(__file__).resolve().parents[2]
#: The dev stack file as it was before its estate moved into environments/dev (inline estate).
LEGACY_DEV = ROOT / "tests" / "fixtures" / "legacy" / "Pulumi.dev.yaml"


def _write_folder(folder: Path, files: dict[str, Any]) -> Path:
    for name, content in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content if isinstance(content, str) else yaml.safe_dump(content, sort_keys=False))
    return folder


def _credentials() -> dict[str, Any]:
    return {
        "director": {"username": "admin", "password": DIRECTOR_PASSWORD},
        "rack-a-bmc": {"username": "root", "password": HOST_BMC_PASSWORD},
        "dpu-bmc": {"username": "root", "password": DPU_BMC_PASSWORD},
    }


def _split(estate: dict[str, Any]) -> dict[str, Any]:
    """``valid_estate()`` as a folder: secrets replaced by references, hosts over two files."""
    raw = copy.deepcopy(estate)
    del raw["fabric"]["director"]["username"], raw["fabric"]["director"]["password"]
    raw["fabric"]["director"]["credential"] = "director"
    for host in raw["hosts"]:
        del host["bmc"]["username"], host["bmc"]["password"]
        host["bmc"]["credential"] = "rack-a-bmc"
        if "dpu" in host:
            del host["dpu"]["bmc"]["username"], host["dpu"]["bmc"]["password"]
            host["dpu"]["bmc"]["credential"] = "dpu-bmc"
    hosts, tenants = raw.pop("hosts"), raw.pop("tenants")
    fabric = {"fabric": raw.pop("fabric")}
    return {
        "estate.yaml": raw,
        "fabric.yaml": fabric,
        "hosts/rack-a.yaml": {"hosts": hosts[:2]},
        "hosts/rack-b.yaml": {"hosts": hosts[2:]},
        "tenants.yaml": {"tenants": tenants},
    }


def _load(folder: Path, credentials: Any = None, **kwargs: Any) -> Any:
    creds = _credentials() if credentials is None else credentials
    return estate_from_config({"inventory": "inv", "credentials": creds}, root=folder.parent, **kwargs)


def _problems(folder: Path, credentials: Any = None, **kwargs: Any) -> list[str]:
    with pytest.raises(EstateConfigError) as err:
        _load(folder, credentials, **kwargs)
    return [str(p) for p in err.value.problems]


def test_the_folder_gives_the_same_estate_as_the_inline_config(tmp_path: Path) -> None:
    folder = _write_folder(tmp_path / "inv", _split(valid_estate()))
    assert _load(folder) == load_estate(valid_estate())


def test_a_problem_names_the_file_the_key_inside_it_and_the_rule(tmp_path: Path) -> None:
    files = _split(valid_estate())
    files["hosts/rack-b.yaml"]["hosts"][1]["bmc"]["endpoint"] = "not a url"
    assert _problems(_write_folder(tmp_path / "a" / "inv", files)) == [
        "inv/hosts/rack-b.yaml: hosts[1].bmc.endpoint: 'not a url' is not an http:// or https:// URL"
    ]
    # a cross-file rule: the second file's host repeats the first file's
    files = _split(valid_estate())
    files["hosts/rack-b.yaml"]["hosts"][0]["name"] = "hv-1"
    problems = _problems(_write_folder(tmp_path / "b" / "inv", files))
    assert problems[0] == (
        "inv/hosts/rack-b.yaml: hosts[0].name: duplicate host name 'hv-1' (first at hosts[0].name in "
        "inv/hosts/rack-a.yaml)"
    )


def test_a_key_written_in_two_files_is_refused_naming_both(tmp_path: Path) -> None:
    files = _split(valid_estate())
    files["more.yaml"] = {"environment": "production"}
    problems = _problems(_write_folder(tmp_path / "inv", files))
    assert problems == [
        "inv/more.yaml: environment: is also set in inv/estate.yaml; write it in one file (only "
        "hosts, hypervisor_clusters, tenants, gpu_compositions, composers, gpu_products are lists joined "
        "over files)"
    ]


def test_an_unreadable_file_is_named_with_the_line(tmp_path: Path) -> None:
    files = _split(valid_estate())
    files["tenants.yaml"] = "tenants:\n  - name: red\n   networks: []\n"
    problems = _problems(_write_folder(tmp_path / "inv", files))
    assert len(problems) == 1 and problems[0].startswith("inv/tenants.yaml: not valid YAML: line 3, column 4")
    assert _problems(tmp_path / "absent" / "inv") == ["inv: the inventory folder does not exist"]


@pytest.mark.parametrize("value", [HOST_BMC_PASSWORD, {"secure": "v1:abc:def"}])
def test_a_secret_in_an_inventory_file_is_refused_naming_file_and_key(tmp_path: Path, value: Any) -> None:
    files = _split(valid_estate())
    files["hosts/rack-b.yaml"]["hosts"][1]["bmc"]["password"] = value
    problems = _problems(_write_folder(tmp_path / "inv", files))
    how = "in plain text" if isinstance(value, str) else "encrypted"
    assert problems == [
        f"inv/hosts/rack-b.yaml: hosts[1].bmc.password: a secret {how} in an inventory file is refused; "
        "name a credential set instead (credential: <name>) and store it with: "
        "pulumi config set --secret --path 'credentials.<name>.password'"
    ]
    assert not any(pw in p for p in problems for pw in ALL_PASSWORDS)


def test_references_to_credential_sets_are_checked(tmp_path: Path) -> None:
    files = _split(valid_estate())
    files["hosts/rack-a.yaml"]["hosts"][0]["bmc"]["credential"] = "rack-a-bcm"
    del files["hosts/rack-b.yaml"]["hosts"][0]["bmc"]["credential"]
    files["fabric.yaml"]["fabric"]["director"]["username"] = "admin"
    problems = _problems(_write_folder(tmp_path / "inv", files))
    assert problems == [
        "inv/fabric.yaml: fabric.director.username: is set here and by credential set 'director'; keep one",
        "inv/hosts/rack-a.yaml: hosts[0].bmc.credential: credential set 'rack-a-bcm' is not in "
        "composable-gpu:credentials (did you mean 'rack-a-bmc'?); add it with: "
        "pulumi config set --secret --path 'credentials.rack-a-bcm.password'",
        "inv/hosts/rack-b.yaml: hosts[0].bmc.credential: required key is missing: name the credential set "
        "that holds its password (store it with: pulumi config set --secret --path "
        "'credentials.<name>.password')",
    ]


def test_a_secret_a_set_lacks_is_missing_unless_allowed(tmp_path: Path) -> None:
    folder = _write_folder(tmp_path / "inv", _split(valid_estate()))
    creds = _credentials()
    del creds["dpu-bmc"]["password"]
    problems = _problems(folder, creds)
    assert problems[0] == (
        "inv/hosts/rack-a.yaml: hosts[0].dpu.bmc.password: required key is missing (credential set "
        "'dpu-bmc' has no password; set it with: pulumi config set --secret --path "
        "'credentials.dpu-bmc.password')"
    )
    assert _load(folder, creds, fill_missing_secrets=True).hosts[0].dpu is not None


def test_credential_sets_are_validated_as_stack_config(tmp_path: Path) -> None:
    folder = _write_folder(tmp_path / "inv", _split(valid_estate()))
    creds = {**_credentials(), "Bad_Name": {"username": "x", "pasword": "y"}}
    problems = _problems(folder, creds)
    assert len(problems) == 2
    assert problems[0].startswith("credentials.Bad_Name: 'Bad_Name' is not a DNS label")
    assert problems[1] == "credentials.Bad_Name.pasword: unknown key (did you mean 'password'?)"


def test_a_plain_text_credential_in_the_stack_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write_folder(tmp_path / "inv", _split(valid_estate()))
    creds = {name: {**c, "password": {"secure": "v1:abc:def"}} for name, c in _credentials().items()}
    creds["rack-a-bmc"]["password"] = HOST_BMC_PASSWORD
    stack = tmp_path / "Pulumi.x.yaml"
    stack.write_text(yaml.safe_dump({"config": {"composable-gpu:inventory": "inv",
                                                "composable-gpu:credentials": creds}}))
    assert main(["validate", str(stack)]) == 1
    err = capsys.readouterr().err
    assert ("  - credentials.rack-a-bmc.password: is in plain text in Pulumi.x.yaml; store it encrypted: "
            "pulumi config set --secret --path 'credentials.rack-a-bmc.password'") in err.splitlines()
    assert HOST_BMC_PASSWORD not in err
    creds["rack-a-bmc"]["password"] = {"secure": "v1:abc:def"}
    stack.write_text(yaml.safe_dump({"config": {"composable-gpu:inventory": "inv",
                                                "composable-gpu:credentials": creds}}))
    assert main(["validate", str(stack)]) == 0


def test_the_inline_estate_and_the_folder_are_not_both_read(tmp_path: Path) -> None:
    with pytest.raises(EstateConfigError) as err:
        estate_from_config({"inventory": "inv", "estate": valid_estate()}, root=tmp_path)
    assert str(err.value.problems[0]).startswith(
        "composable-gpu:estate: is set beside composable-gpu:inventory"
    )


def test_the_migration_of_the_inline_dev_stack_gives_back_its_estate(tmp_path: Path) -> None:
    """The dev stack's inline file (as it was before its folder): the migration's files and sets,
    joined again, are the same estate; one set for the Director and one for every BMC; the layout
    environments/dev started from."""
    legacy = yaml.safe_load(LEGACY_DEV.read_text())
    plan = plan_migration(_decrypted(legacy["config"]["composable-gpu:estate"]))
    assert plan.credentials == {"director": {"username": "admin"}, "bmc": {"username": "root"}}
    assert [(name, key) for name, key, _ in plan.secrets] == [("director", "password"), ("bmc", "password")]
    assert sorted(plan.files) == ["clusters.yaml", "estate.yaml", "fabric.yaml", "hosts/lab-workers.yaml",
                                  "tenants/alpha.yaml", "tenants/beta.yaml"]
    folder = _write_folder(tmp_path / "migrated", {n: dump_yaml(c) for n, c in plan.files.items()})
    _, _, problems = join_inventory(read_inventory(folder), "migrated")
    assert problems == []
    config = migrated_stack_config(legacy["config"], "environments/dev", plan.credentials)
    assert list(config) == ["composable-gpu:inventory", "composable-gpu:credentials"]
    sets = {n: {**f, **{k: v for m, k, v in plan.secrets if m == n}} for n, f in plan.credentials.items()}
    assert estate_from_config({"inventory": "migrated", "credentials": sets}, root=tmp_path) == load_estate(
        _decrypted(legacy["config"]["composable-gpu:estate"])
    )


def test_the_migration_keeps_distinct_credentials_apart_and_absent_secrets_absent() -> None:
    estate = valid_estate()
    del estate["hosts"][3]["bmc"]["password"]  # set per deployment
    plan = plan_migration(estate)
    assert plan.credentials == {
        "director": {"username": "admin"}, "bmc": {"username": "root"}, "dpu-bmc": {"username": "root"},
        "bmc-2": {"username": "root"},
    }
    assert [(n, k) for n, k, _ in plan.secrets] == [("director", "password"), ("bmc", "password"),
                                                    ("dpu-bmc", "password")]
    hosts = [h for name, f in plan.files.items() if name.startswith("hosts") for h in f["hosts"]]
    assert [h["bmc"]["credential"] for h in hosts] == ["bmc", "bmc", "bmc", "bmc-2"]
    assert all(pw not in dump_yaml(f) for f in plan.files.values() for pw in ALL_PASSWORDS)


def _decrypted(value: Any, path: str = "") -> Any:
    """The dev stack's estate with its ciphertexts replaced by stand-in plaintexts: the Director's
    password, and one BMC password shared by every BMC (as the dev stack's ciphertexts decrypt)."""
    if isinstance(value, dict):
        if set(value) == {"secure"}:
            return "director-pw" if path.startswith(".fabric") else "bmc-pw"
        return {k: _decrypted(v, f"{path}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [_decrypted(v, path) for v in value]
    return value


def test_a_private_chart_repository_names_its_credential_set(tmp_path: Path) -> None:
    """Chart repositories: a public one has no ``credentials``; a private one's name a set, and a
    problem above them never quotes the set's password."""
    files = _split(valid_estate())
    files["estate.yaml"]["catalog"] = {"repositories": [
        {"name": "internal", "url": "oci://registry.example/charts",
         "credentials": {"credential": "registry"}},
        {"name": "nvidia", "url": "https://helm.ngc.nvidia.com/nvidia"},
        {"name": "k0rdent-catalog", "url": "oci://ghcr.io/k0rdent/catalog/charts"},
        {"name": "cilium", "url": "https://helm.cilium.io"},
        {"name": "composable-gpu-templates", "url": "oci://ghcr.io/composable-gpu/charts"},
    ]}
    folder = _write_folder(tmp_path / "inv", files)
    creds = {**_credentials(), "registry": {"username": "robot", "password": "registry-pw"}}
    repos = _load(folder, creds).catalog.repositories
    internal = next(r for r in repos if r.name == "internal")
    assert internal.credentials is not None
    assert internal.credentials.password.get_secret_value() == "registry-pw"
    assert all(r.credentials is None for r in repos if r.name != "internal")
    # a model-level problem above a resolved secret never quotes it
    files["estate.yaml"]["catalog"]["repositories"].append({"name": "kcm-templates", "url": "oci://x.example/c"})
    problems = _problems(_write_folder(tmp_path / "bad" / "inv", files), creds)
    assert problems and not any("registry-pw" in p for p in problems), problems
