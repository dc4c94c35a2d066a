"""The work an item of a dataset may do, by name: the calls that read or decode a file, the
libraries that transform images, what a tokenizer is called.  Shared by the item-cost analysis of
a module (item_cost.py, on libcst's tree) and by the project index (project.py, on CPython's, for
a dataset class of another module): plain names and patterns, no tree."""

from __future__ import annotations

import re

# Calls that read or decode a file, by qualified name, and what the message says they do.
READERS = {
    "open": "opens a file with `open`",
    "io.open": "opens a file with `io.open`",
    "PIL.Image.open": "decodes an image with `PIL.Image.open`",
    "cv2.imread": "decodes an image with `cv2.imread`",
    "cv2.imdecode": "decodes an image with `cv2.imdecode`",
    "cv2.VideoCapture": "decodes video with `cv2.VideoCapture`",
    "skimage.io.imread": "decodes an image with `skimage.io.imread`",
    "imageio.imread": "decodes an image with `imageio.imread`",
    "imageio.v2.imread": "decodes an image with `imageio.v2.imread`",
    "imageio.v3.imread": "decodes an image with `imageio.v3.imread`",
    "tifffile.imread": "decodes an image with `tifffile.imread`",
    "torchaudio.load": "decodes audio with `torchaudio.load`",
    "soundfile.read": "decodes audio with `soundfile.read`",
    "librosa.load": "decodes audio with `librosa.load`",
    "scipy.io.wavfile.read": "decodes audio with `scipy.io.wavfile.read`",
    "numpy.load": "reads a file with `np.load`",
    "numpy.fromfile": "reads a file with `np.fromfile`",
    "numpy.memmap": "reads a file with `np.memmap`",
    "h5py.File": "reads an HDF5 file with `h5py.File`",
    "json.load": "reads a file with `json.load`",
    "pickle.load": "reads a file with `pickle.load`",
    "torch.load": "reads a file with `torch.load`",
    "pandas.read_csv": "reads a file with `pd.read_csv`",
    "pandas.read_parquet": "reads a file with `pd.read_parquet`",
    "nibabel.load": "reads a volume with `nibabel.load`",
    "pydicom.dcmread": "decodes an image with `pydicom.dcmread`",
    "decord.VideoReader": "decodes video with `decord.VideoReader`",
    "av.open": "decodes video with `av.open`",
    # An item that waits: for the network, or (a stand-in for a slow read) for the clock.
    "requests.get": "fetches over the network with `requests.get`",
    "urllib.request.urlopen": "fetches over the network with `urlopen`",
    "time.sleep": "waits in `time.sleep`",
}
# torchvision.io's readers and decoders: read_image, read_file, read_video, decode_jpeg, ...
_TORCHVISION_IO = re.compile(r"^torchvision\.io\.(?:image\.|video\.)?(read_\w+|decode_\w+)$")
# Libraries whose calls transform an image (decoded pixels in, new pixels out).
TRANSFORMS = re.compile(r"^(torchvision\.transforms|albumentations|imgaug|monai\.transforms)(\.|$)")
# A tokenizer, by the name it is held under or the method called on it.
TOKENIZER_NAME = re.compile(r"tokeni[sz]er|(^|_)tok$|processor", re.IGNORECASE)
TOKENIZER_METHODS = frozenset({"encode", "encode_plus", "batch_encode_plus", "tokenize", "__call__"})


def reader_phrase(qualified: str) -> str | None:
    """What a call of `qualified` does to a file, in a message's words ("decodes an image with
    `PIL.Image.open`"); None for a call that reads no file."""
    phrase = READERS.get(qualified)
    if phrase is None and _TORCHVISION_IO.match(qualified):
        phrase = f"decodes a file with `{qualified.rsplit('.', 1)[-1]}`"
    return phrase


def is_transform(qualified: str) -> bool:
    """A call of an image-transform library (`torchvision.transforms.RandomCrop`, albumentations)."""
    return bool(TRANSFORMS.match(qualified))


def is_tokenizer_call(callee: str | None, method: str | None, receiver: str | None) -> bool:
    """`tokenizer(text)` (`callee` the called name's last part), or `self.tokenizer.encode(text)`
    (`method` the method called on `receiver`, the last part of what it is called on)."""
    if method is not None and method in TOKENIZER_METHODS and receiver is not None:
        return bool(TOKENIZER_NAME.search(receiver))
    return callee is not None and bool(TOKENIZER_NAME.search(callee))
