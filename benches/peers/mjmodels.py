"""ContactLab's robots in MuJoCo, for side-by-side measurements (benches/peers/, python/bench/).

MuJoCo's URDF importer welds the root link to the world and drops visuals; ``floating`` moves
everything under a body with a free joint and the root link's inertia, adds a floor, makes every
geom's friction the ContactLab terrain's (MuJoCo takes the larger of a pair's), sets the time
step and the integrator, and adds actuators: torque motors, or position servos ``kp``, ``kv``
(MuJoCo's implicit-in-velocity PD, as ContactLab's `JointPd` with its implicit damping) with
ContactLab's effort limits as force limits.
"""

import os
import tempfile
import xml.etree.ElementTree as ET


def floating(mujoco, urdf_text, friction=0.8, dt=0.002, base_height=0.33, pd=None, integrator="implicitfast"):
    """The MjModel of a ContactLab URDF with a floating root (module docs). ``pd = (kp, kv)``
    gives position servos (set ``ctrl`` to the posture); ``None`` torque motors."""
    fixed = mujoco.MjModel.from_xml_string(urdf_text)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "fixed.xml")
        mujoco.mj_saveLastXML(path, fixed)
        root = ET.parse(path).getroot()
    urdf = ET.fromstring(urdf_text)
    root_link = {c.get("link") for c in urdf.iter("child")}
    base = next(link for link in urdf.iter("link") if link.get("name") not in root_link)
    inertial = base.find("inertial")
    inertia = inertial.find("inertia")
    world = root.find("worldbody")
    trunk = ET.Element("body", name=base.get("name"), pos=f"0 0 {base_height}")
    ET.SubElement(trunk, "freejoint", name="root")
    ET.SubElement(
        trunk,
        "inertial",
        pos="0 0 0",
        mass=inertial.find("mass").get("value"),
        diaginertia=f"{inertia.get('ixx')} {inertia.get('iyy')} {inertia.get('izz')}",
    )
    for child in list(world):
        world.remove(child)
        trunk.append(child)
    for geom in trunk.iter("geom"):
        geom.set("friction", f"{friction} 0.005 0.0001")
    ET.SubElement(world, "geom", name="floor", type="plane", size="0 0 1", friction=f"{friction} 0.005 0.0001")
    world.append(trunk)
    option = root.find("option")
    if option is None:
        option = ET.SubElement(root, "option")
    option.set("timestep", str(dt))
    option.set("integrator", integrator)
    actuators = ET.SubElement(root, "actuator")
    for joint in root.iter("joint"):
        if joint.get("actuatorfrcrange") is None:
            continue
        lo, hi = joint.get("actuatorfrcrange").split()
        if pd is None:
            ET.SubElement(actuators, "motor", joint=joint.get("name"), ctrlrange=f"{lo} {hi}", ctrllimited="true")
        else:
            ET.SubElement(
                actuators,
                "position",
                joint=joint.get("name"),
                kp=str(pd[0]),
                kv=str(pd[1]),
                forcerange=f"{lo} {hi}",
                forcelimited="true",
            )
    return mujoco.MjModel.from_xml_string(ET.tostring(root, encoding="unicode"))


def plate(mujoco, points, friction=0.8, dt=0.002, integrator="implicitfast"):
    """A 0.4 x 0.4 x 0.04 m, 2 kg plate resting on ``points`` (x, y) of its bottom face, each a
    contact point (a sphere of radius 1e-4 m; the box itself does not collide), as ContactLab's
    plate of benches/scaling.rs."""
    spheres = "".join(
        f'<geom type="sphere" size="0.0001" pos="{x} {y} -0.02" mass="0" friction="{friction} 0.005 0.0001"/>'
        for x, y in points
    )
    xml = f"""<mujoco><option timestep="{dt}" integrator="{integrator}"/>
      <worldbody><geom name="floor" type="plane" size="0 0 1" friction="{friction} 0.005 0.0001"/>
        <body name="plate" pos="0 0 0.0201"><freejoint/>
          <geom type="box" size="0.2 0.2 0.02" mass="2" contype="0" conaffinity="0"/>{spheres}
        </body></worldbody></mujoco>"""
    return mujoco.MjModel.from_xml_string(xml)


def plate_points(k):
    """The grid of benches/scaling.rs: k = 1, 4, 8, 16, 32 points over 0.36 x 0.36 m."""
    nx, ny = {1: (1, 1), 4: (2, 2), 8: (2, 4), 16: (4, 4), 32: (4, 8)}[k]

    def at(i, n):
        return 0.0 if n == 1 else 0.36 * (i / (n - 1) - 0.5)

    return [(at(i % nx, nx), at(i // nx, ny)) for i in range(nx * ny)]
