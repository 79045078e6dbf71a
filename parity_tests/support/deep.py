"""Trees deeper than Python's recursion limit, made and removed without recursion.

``shutil.rmtree`` recurses once per level on Python 3.11 and raises ``RecursionError`` on a
tree some 1,000 levels deep -- and pytest removes old temporary folders with it at the next
session's start, so a test that leaves such a tree behind breaks later runs: each test
removes its own with :func:`remove_tree`.
"""

import os


def make_chain(top, depth, name=b"d"):
    """``top/d/d/.../d``, ``depth`` levels; returns the deepest folder (bytes)."""
    path = os.fsencode(top)
    os.makedirs(path, exist_ok=True)
    for _ in range(depth):
        path = os.path.join(path, name)
        os.mkdir(path)
    return path


def remove_tree(top):
    """Remove ``top`` and everything under it, iteratively (links are removed, not followed)."""
    folders, todo = [], [os.fsencode(top)]
    while todo:
        folder = todo.pop()
        folders.append(folder)
        with os.scandir(folder) as it:
            for e in it:
                if e.is_dir(follow_symlinks=False):
                    todo.append(e.path)
                else:
                    os.unlink(e.path)
    for folder in reversed(folders):
        os.rmdir(folder)
