"""Settings layers (defaults < file < environment < flags), their errors, and ``pbot-watch config``."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

import pytest

from pbot_watch.config import (
    Settings,
    SettingsError,
    apply_env_file,
    load_settings,
    read_env_file,
    resolve_settings,
    template,
)
from pbot_watch.config_paths import default_config_path
from tests.support.cli import invoke


def write_config(home: Path, text: str) -> Path:
    path = home / "config" / "pbot-watch" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


class TestLayers:
    def test_defaults_when_nothing_is_configured(self, isolated_home: Path) -> None:
        """With no file, no variables and no flags every value is the default and says so."""
        resolved = resolve_settings()
        assert resolved.settings == Settings()
        assert resolved.origins == {}
        assert resolved.config_file_found is False
        assert resolved.config_file == isolated_home / "config" / "pbot-watch" / "config.toml"
        assert resolved.settings.sessions == [isolated_home / ".pi" / "agent" / "sessions"]
        assert resolved.settings.state_dir == isolated_home / "state" / "pbot-watch"

    def test_file_overrides_defaults(self, isolated_home: Path) -> None:
        """A key in config.toml replaces the default and is attributed to the file."""
        path = write_config(isolated_home, 'debounce_seconds = 0.5\nmodel = "openai/gpt-4o-mini"\n')
        resolved = resolve_settings()
        assert resolved.settings.debounce_seconds == 0.5
        assert resolved.settings.model == "openai/gpt-4o-mini"
        assert resolved.origin("model").kind == "file"
        assert resolved.origin("model").where == str(path)
        assert resolved.origin("idle_seconds").kind == "default"

    def test_env_overrides_file(self, isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """PBOT_WATCH_<KEY> wins over the file."""
        write_config(isolated_home, "debounce_seconds = 0.5\n")
        monkeypatch.setenv("PBOT_WATCH_DEBOUNCE_SECONDS", "2")
        resolved = resolve_settings()
        assert resolved.settings.debounce_seconds == 2.0
        assert resolved.origin("debounce_seconds").label() == "env PBOT_WATCH_DEBOUNCE_SECONDS"

    def test_flags_override_env(self, isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """A flag wins over the environment and the file."""
        write_config(isolated_home, 'archive = "/from/file"\n')
        monkeypatch.setenv("PBOT_WATCH_ARCHIVE", "/from/env")
        resolved = resolve_settings({"archive": Path("/from/flag")})
        assert resolved.settings.archive == Path("/from/flag")
        assert resolved.origin("archive").label() == "flag --archive"

    def test_empty_flags_are_not_given(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """click's empty tuple and None mean the flag was not used, so the environment stays in force."""
        monkeypatch.setenv("PBOT_WATCH_SESSIONS", "/env/a")
        settings = load_settings({"sessions": (), "archive": None})
        assert settings.sessions == [Path("/env/a")]
        assert settings.archive is None

    def test_env_lists(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Session roots split on os.pathsep, globs on commas."""
        monkeypatch.setenv("PBOT_WATCH_SESSIONS", os.pathsep.join(["/a", "/b"]))
        monkeypatch.setenv("PBOT_WATCH_EXCLUDE", "/tmp/*, /scratch/* ,")
        settings = load_settings()
        assert settings.sessions == [Path("/a"), Path("/b")]
        assert settings.exclude == ["/tmp/*", "/scratch/*"]

    def test_env_bool(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Booleans from the environment accept the usual spellings."""
        monkeypatch.setenv("PBOT_WATCH_POLL", "yes")
        assert load_settings().poll is True
        monkeypatch.setenv("PBOT_WATCH_POLL", "0")
        assert load_settings().poll is False

    def test_pbot_watch_config_names_the_file(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """PBOT_WATCH_CONFIG replaces the XDG location."""
        path = tmp_path / "elsewhere.toml"
        path.write_text("idle_seconds = 5\n")
        monkeypatch.setenv("PBOT_WATCH_CONFIG", str(path))
        assert default_config_path() == path
        assert load_settings().idle_seconds == 5

    def test_dashed_keys_in_file(self, isolated_home: Path) -> None:
        """Keys may be spelled like the flags, with dashes."""
        write_config(isolated_home, "max-calls-per-day = 7\n")
        assert load_settings().max_calls_per_day == 7

    def test_tilde_is_expanded(self, isolated_home: Path) -> None:
        """``~`` in a path setting means the home folder."""
        write_config(isolated_home, 'archive = "~/pbot-archive"\n')
        assert load_settings().archive == isolated_home / "pbot-archive"

    def test_relative_path_in_file_is_relative_to_the_file(self, isolated_home: Path) -> None:
        """The service runs elsewhere, so a relative path in config.toml is anchored at the file's folder."""
        path = write_config(isolated_home, 'archive = "archive"\nsessions = ["s1", "/abs/s2"]\n')
        settings = load_settings()
        assert settings.archive == path.parent / "archive"
        assert settings.sessions == [path.parent / "s1", Path("/abs/s2")]

    def test_relative_flag_is_relative_to_cwd(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """A relative --archive means the current directory's folder, made absolute."""
        monkeypatch.chdir(tmp_path)
        assert load_settings({"archive": Path("arch")}).archive == tmp_path / "arch"


class TestErrors:
    def test_unknown_key_in_file_is_named_with_its_file(self, isolated_home: Path) -> None:
        """A typo in config.toml is an error that names the key, the file and a likely fix."""
        path = write_config(isolated_home, "debouce_seconds = 1\n")
        with pytest.raises(SettingsError) as caught:
            load_settings()
        message = str(caught.value)
        assert f"debouce_seconds ({path}): unknown setting; did you mean debounce_seconds?" in message

    def test_bad_value_in_file_names_key_value_and_file(self, isolated_home: Path) -> None:
        """A value of the wrong type names the key, the value and where it was written."""
        path = write_config(isolated_home, 'idle_seconds = "soon"\n')
        with pytest.raises(SettingsError) as caught:
            load_settings()
        assert f"idle_seconds = 'soon' ({path})" in str(caught.value)

    def test_bad_value_in_env_names_the_variable(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """An out-of-range value from the environment names the variable."""
        monkeypatch.setenv("PBOT_WATCH_DEBOUNCE_SECONDS", "-1")
        with pytest.raises(SettingsError) as caught:
            load_settings()
        message = str(caught.value)
        assert "debounce_seconds = '-1' (PBOT_WATCH_DEBOUNCE_SECONDS)" in message
        assert "greater than or equal to 0" in message

    def test_bad_choice_from_flag_names_the_flag(self) -> None:
        """An invalid flag value names the flag."""
        with pytest.raises(SettingsError) as caught:
            load_settings({"log_format": "xml"})
        assert "log_format = 'xml' (--log-format)" in str(caught.value)

    def test_every_bad_key_is_reported_at_once(self, isolated_home: Path) -> None:
        """Several mistakes are reported together, so one edit fixes them all."""
        write_config(isolated_home, "poll = 3\nmax_calls_per_day = -4\n")
        with pytest.raises(SettingsError) as caught:
            load_settings()
        assert "poll = 3" in str(caught.value)
        assert "max_calls_per_day = -4" in str(caught.value)

    def test_bad_toml_names_the_file_and_line(self, isolated_home: Path) -> None:
        """A syntax error names the file and where in it."""
        path = write_config(isolated_home, "model = \n")
        with pytest.raises(SettingsError) as caught:
            load_settings()
        assert str(caught.value).startswith(f"config file {path} is not valid TOML")
        assert "line 1" in str(caught.value)

    def test_missing_named_config_file(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """A file named by PBOT_WATCH_CONFIG must exist; only the default one is optional."""
        monkeypatch.setenv("PBOT_WATCH_CONFIG", str(tmp_path / "missing.toml"))
        with pytest.raises(SettingsError, match=r"missing\.toml does not exist"):
            load_settings()

    def test_key_given_twice_in_file(self, isolated_home: Path) -> None:
        """A key and its dashed spelling cannot both be given."""
        write_config(isolated_home, "max_calls_per_day = 1\nmax-calls-per-day = 2\n")
        with pytest.raises(SettingsError, match="given twice"):
            load_settings()

    def test_unknown_env_variables_are_reported_not_fatal(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """PBOT_WATCH_MODLE is listed as unknown; PBOT_WATCH_CONFIG is not a setting but is known."""
        monkeypatch.setenv("PBOT_WATCH_MODLE", "x")
        assert resolve_settings().unknown_env == ["PBOT_WATCH_MODLE"]


class TestTemplate:
    def test_template_is_valid_toml_when_uncommented(self) -> None:
        """Uncommenting the template's assignments gives a file that loads; every key is listed."""
        assignments = [
            line.removeprefix("# ").split("  #")[0].rstrip()
            for line in template().splitlines()
            if line.startswith("# ") and (" =" in line or line.startswith("# ["))
        ]
        # Top-level keys, then each table ([team]) as a section after them.
        top = assignments[: next(i for i, a in enumerate(assignments) if a.startswith("["))]
        tables = {line.strip("[]") for line in assignments if line.startswith("[")}
        assert {line.split(" =")[0] for line in top} | tables == set(Settings.model_fields)
        data = tomllib.loads("\n".join(line for line in assignments if not line.endswith("=")))
        assert Settings.model_validate(data).debounce_seconds == Settings().debounce_seconds

    def test_docs_quote_the_template(self) -> None:
        """docs/configuration.md holds the current template, so the reference cannot go stale."""
        docs = (Path(__file__).resolve().parent.parent / "docs" / "configuration.md").read_text(
            encoding="utf-8"
        )
        assert template() in docs, (
            "regenerate the reference in docs/configuration.md: pbot-watch config --template"
        )


class TestEnvFile:
    def test_read_env_file(self, tmp_path: Path) -> None:
        """Comments, blank lines, ``export`` and quotes are understood as systemd does."""
        path = tmp_path / "env"
        path.write_text("# keys\n\nOPENAI_API_KEY=sk-1\nexport B=\"two words\"\n; c\nC='x=y'\n")
        assert read_env_file(path) == {"OPENAI_API_KEY": "sk-1", "B": "two words", "C": "x=y"}

    def test_bad_line_names_file_and_line(self, tmp_path: Path) -> None:
        """A line without ``=`` is an error with its line number."""
        path = tmp_path / "env"
        path.write_text("A=1\nnot a pair\n")
        with pytest.raises(SettingsError, match=r"env:2: expected KEY=VALUE"):
            read_env_file(path)

    def test_apply_keeps_existing_variables(self, tmp_path: Path) -> None:
        """Variables already in the environment win over the file."""
        path = tmp_path / "env"
        path.write_text("A=file\nB=file\n")
        environ = {"A": "shell"}
        applied = apply_env_file(Settings(env_file=path), environ)
        assert applied == ["B"]
        assert environ == {"A": "shell", "B": "file"}

    def test_default_env_file_is_optional(self, isolated_home: Path) -> None:
        """Without env_file and without the default file nothing happens; the default file is used if present."""
        environ: dict[str, str] = {}
        assert apply_env_file(Settings(), environ) == []
        default = isolated_home / "config" / "pbot-watch" / "env"
        default.parent.mkdir(parents=True)
        default.write_text("K=v\n")
        assert apply_env_file(Settings(), environ) == ["K"]

    def test_configured_env_file_must_exist(self, tmp_path: Path) -> None:
        """A configured env file that is missing is an error naming it."""
        with pytest.raises(SettingsError, match="does not exist"):
            apply_env_file(Settings(env_file=tmp_path / "nope"), {})


class TestConfigCommand:
    def test_json_shows_values_and_sources(self, isolated_home: Path, tmp_path: Path) -> None:
        """``config --json`` gives each key's value and the layer it came from."""
        path = write_config(isolated_home, 'idle_seconds = 12\nmodel = "m-file"\n')
        result = invoke(
            "config", "--json", "--archive", str(tmp_path / "arch"),
            env={"PBOT_WATCH_MODEL": "m-env", "PBOT_WATCH_SESSIONS": str(tmp_path / "会话")},
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        doc = json.loads(result.stdout)
        assert doc["config_file"] == str(path)
        assert doc["config_file_found"] is True
        settings = doc["settings"]
        assert settings["idle_seconds"] == {"value": 12.0, "source": "file", "from": str(path)}
        assert settings["model"] == {"value": "m-env", "source": "env", "from": "PBOT_WATCH_MODEL"}
        assert settings["archive"] == {"value": str(tmp_path / "arch"), "source": "flag", "from": "--archive"}
        assert settings["sessions"]["value"] == [str(tmp_path / "会话")]
        assert settings["poll"] == {"value": False, "source": "default", "from": None}
        assert "会话" in result.stdout  # not \\u escaped

    def test_text_output_names_sources(self, isolated_home: Path) -> None:
        """The plain listing shows one key per line with its source as a comment."""
        result = invoke("config", env={"PBOT_WATCH_POLL": "true"})
        assert result.returncode == 0, result.stderr
        assert "(not found; defaults apply)" in result.stdout.splitlines()[0]
        poll = next(line for line in result.stdout.splitlines() if line.startswith("poll "))
        assert poll.endswith("= true  # env PBOT_WATCH_POLL")

    def test_unknown_env_is_a_warning(self) -> None:
        """An unknown PBOT_WATCH_ variable is a warning on stderr, not a failure."""
        result = invoke("config", env={"PBOT_WATCH_MODLE": "x"})
        assert result.returncode == 0
        assert "PBOT_WATCH_MODLE is not a pbot-watch setting" in result.stderr

    def test_bad_config_is_one_line(self, isolated_home: Path) -> None:
        """A bad file fails with one stderr line naming the key, no traceback."""
        write_config(isolated_home, "nope = 1\n")
        result = invoke("config")
        assert result.returncode == 2  # as from every command (tests/test_errors.py)
        assert result.stderr.startswith("pbot-watch: invalid settings: nope (")
        assert "Traceback" not in result.stderr

    def test_path_and_template(self, isolated_home: Path) -> None:
        """``--path`` prints where the file is read from; ``--template`` prints a commented file."""
        assert invoke("config", "--path").stdout.strip() == str(
            isolated_home / "config" / "pbot-watch" / "config.toml"
        )
        assert invoke("config", "--template").stdout == template()


class TestCues:
    def test_cues_table_from_the_file(self, isolated_home: Path) -> None:
        """[cues] is a table of the config file; its keys may be spelled with dashes."""
        write_config(isolated_home, "[cues]\nmax-tokens = 4000\nmax_percent = 5\nenabled = false\n")
        resolved = resolve_settings()
        cues = resolved.settings.cues
        assert (False, 4000, 5.0) == (cues.enabled, cues.max_tokens, cues.max_percent)
        assert "file" == resolved.origin("cues").kind

    def test_the_smaller_cap_wins_and_disabled_is_no_room(self) -> None:
        """A cap in tokens and one in % of the window: the smaller applies; disabled leaves 0."""
        cues = Settings.model_validate({"cues": {"max_tokens": 4000, "max_percent": 2}}).cues
        assert (2560, 4000, None, 0) == (
            cues.cap(128_000),
            cues.cap(1_000_000),
            Settings().cues.cap(128_000),
            Settings.model_validate({"cues": {"enabled": False}}).cues.cap(128_000),
        )

    def test_a_typo_in_the_table_is_an_error(self, isolated_home: Path) -> None:
        """An unknown key of [cues] is named with the file, as any other mistake."""
        write_config(isolated_home, "[cues]\nmax_token = 4000\n")
        with pytest.raises(SettingsError, match="max_token"):
            resolve_settings()

    def test_config_shows_the_cues(self, isolated_home: Path) -> None:
        """`pbot-watch config` lists the [cues] table in effect and where it came from."""
        write_config(isolated_home, "[cues]\nmax_tokens = 3000\n")
        line = next(x for x in invoke("config").stdout.splitlines() if x.startswith("cues "))
        assert '"max_tokens": 3000' in line
        assert "# file " in line
