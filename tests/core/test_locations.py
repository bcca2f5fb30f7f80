"""Where records live: a workspace's record folder and the include/exclude globs."""

from __future__ import annotations

from pathlib import Path

import pytest

from pbot_watch.archive.locations import exclusion, folder_workspace, workspace_folder


class TestWorkspaceFolder:
    def test_pbot_place(self) -> None:
        """A workspace's records live in its .pi/pbot/history, as pbot keeps them."""
        assert Path("/home/me/project/.pi/pbot/history") == workspace_folder("/home/me/project")

    def test_back_to_the_workspace(self) -> None:
        """A workspace's record folder names its workspace."""
        assert "/home/me/project" == folder_workspace(workspace_folder("/home/me/project"))

    def test_other_folder_names_no_workspace(self) -> None:
        """A central archive folder belongs to no one workspace."""
        assert None is folder_workspace(Path("/home/me/archive"))


class TestExclusion:
    @pytest.mark.parametrize(
        ("include", "exclude", "expected"),
        [
            ((), (), None),
            (("/home/me/*",), (), None),
            (("/srv/*",), (), "not included"),
            ((), ("/home/me/*",), "excluded"),
            (("/home/*",), ("*/project",), "excluded"),
            ((), ("/home/*/PROJECT",), None),
        ],
    )
    def test_globs(self, include: tuple[str, ...], exclude: tuple[str, ...], expected: str | None) -> None:
        """Included when no include glob is set or one matches, unless an exclude glob matches (case-sensitive)."""
        assert expected == exclusion("/home/me/project", include, exclude)

    def test_star_crosses_folders(self) -> None:
        """A ``*`` matches across ``/``: ``/home/*`` covers every folder below ``/home``."""
        assert None is exclusion("/home/me/deep/project", ("/home/*",), ())
