"""The `.npy` header of a 1-D array, for writers that stream the ids first and know their number
only at the end: the one header writer of the package (token arrays and dataset shards alike).

The header is NumPy's own (format version 1.0, as `np.save` writes it), and for a 1-D array it is
always `HEADER_BYTES` long, whatever the length: a writer may reserve that room, stream the ids
after it, and write the header over it once it knows their number.
"""

import io

import numpy as np

HEADER_BYTES = 128  # a multiple of 64, as the format wants; NumPy pads a 1-D array's header to it


def npy_header(dtype: np.dtype, length: int) -> bytes:
    """The header of a `.npy` file holding `length` values of `dtype`, in one dimension."""
    buffer = io.BytesIO()
    header = {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False, "shape": (length,)}
    np.lib.format.write_array_header_1_0(buffer, header)
    data = buffer.getvalue()
    assert len(data) == HEADER_BYTES, len(data)
    return data
